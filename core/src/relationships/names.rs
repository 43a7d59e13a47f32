//! Whether a column's name says it holds another table's key: `visit.visitor_id` names
//! `visitor.id`, `has_pet.stuid` names `student.stuid`, `sbtransaction.sbtxcustid` names
//! `sbcustomer.sbcustid`. Names are read as words (snake_case, camelCase where the case
//! survived, a glued `id` suffix), singular or plural, whole or abbreviated, with the prefix a
//! table gives all its columns (`sbcust…`) and the one a schema gives all its tables (`sb…`)
//! taken off. No data is read here; the data's evidence comes from `super::infer`.

use std::collections::{BTreeMap, HashMap};

/// Words that make a column an identifier of the entity the words before them name.
const ID_WORDS: &[&str] = &["id", "key", "code", "no", "num", "number", "pk", "ref", "uuid"];
/// Suffixes glued to an entity's name (`stuid`, `contid`, `zipcode`).
const GLUED_ID: &[&str] = &["id", "key", "code", "no"];
/// Shortest abbreviation of a name that counts (`stu` for student, `doc` for doctor).
const MIN_ABBREVIATION: usize = 3;
/// Shortest prefix shared by every column of a table (`sbcust`) that is taken off.
const MIN_COLUMN_PREFIX: usize = 3;
/// Shortest prefix shared by every table of a schema (`sb`) that is taken off.
const MIN_SCHEMA_PREFIX: usize = 2;

/// The words of a name, lowercased: split at anything not a letter or digit and where a
/// lowercase letter or digit meets an uppercase one.
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in name.chars() {
        if !ch.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        cur.extend(ch.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// An English word's singular, by its ending (`countries` → `country`, `classes` → `class`,
/// `pets` → `pet`; `address`, `status`, `analysis` stay).
pub fn singular(w: &str) -> String {
    let n = w.len();
    if n > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..n - 3]);
    }
    if n > 3 && (w.ends_with("sses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes")) {
        return w[..n - 2].to_string();
    }
    if n > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return w[..n - 1].to_string();
    }
    w.to_string()
}

/// The longest prefix every name shares (by characters).
pub fn common_prefix<'a>(mut names: impl Iterator<Item = &'a str>) -> String {
    let Some(first) = names.next() else { return String::new() };
    let mut len = first.len();
    for n in names {
        len = first.bytes().zip(n.bytes()).take(len).take_while(|(a, b)| a == b).count();
        if len == 0 {
            break;
        }
    }
    while !first.is_char_boundary(len) {
        len -= 1;
    }
    first[..len].to_string()
}

/// The words of a name without its identifier suffix, and whether it had one.
fn strip_id(mut ws: Vec<String>) -> (Vec<String>, bool) {
    let Some(last) = ws.last().cloned() else { return (ws, false) };
    if ID_WORDS.contains(&last.as_str()) {
        ws.pop();
        return (ws, true);
    }
    for s in GLUED_ID {
        if last.len() > s.len() + 1 && last.ends_with(s) {
            let stem = last[..last.len() - s.len()].to_string();
            ws.pop();
            ws.push(stem);
            return (ws, true);
        }
    }
    (ws, false)
}

/// How a table is named, for matching columns against it.
#[derive(Debug, Clone)]
pub struct TableNames {
    /// The table's name, lowercased, without its schema.
    name: String,
    /// The prefix every column of the table starts with (lowercased; empty when too short).
    column_prefix: String,
    /// Names the table's rows go by, with how strongly: 2 the whole name (`model_list`,
    /// `continents` → `continent`), 1 one word of it or its columns' prefix.
    forms: Vec<(String, u8)>,
}

impl TableNames {
    /// `columns`: the table's column names; `schema_prefix`: what every table name of its
    /// schema starts with ([`schema_prefix`]).
    pub fn new(name: &str, columns: &[&str], schema_prefix: &str) -> TableNames {
        let lower = name.to_lowercase();
        let column_prefix = if columns.len() >= 3 {
            let lowered: Vec<String> = columns.iter().map(|c| c.to_lowercase()).collect();
            let p = common_prefix(lowered.iter().map(String::as_str));
            // never a whole column name: each column keeps something of its own
            if p.len() >= MIN_COLUMN_PREFIX && lowered.iter().all(|c| c.len() > p.len()) {
                p
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        let ws: Vec<String> = words(name).iter().map(|w| singular(w)).collect();
        let mut forms: Vec<(String, u8)> = Vec::new();
        let add = |f: String, s: u8, forms: &mut Vec<(String, u8)>| {
            if f.is_empty() {
                return;
            }
            match forms.iter_mut().find(|(g, _)| *g == f) {
                Some(e) => e.1 = e.1.max(s),
                None => forms.push((f, s)),
            }
        };
        add(ws.concat(), 2, &mut forms);
        for w in &ws {
            add(w.clone(), 1, &mut forms);
        }
        if !schema_prefix.is_empty() && lower.len() > schema_prefix.len() + 2 && lower.starts_with(schema_prefix) {
            add(singular(&lower[schema_prefix.len()..]), 2, &mut forms);
        }
        if !column_prefix.is_empty() {
            let p = if schema_prefix.is_empty() { &column_prefix[..] } else { column_prefix.strip_prefix(schema_prefix).unwrap_or(&column_prefix) };
            if p.len() >= 2 {
                add(p.trim_end_matches('_').to_string(), 1, &mut forms);
            }
        }
        TableNames { name: lower, column_prefix, forms }
    }

    pub fn forms(&self) -> &[(String, u8)] {
        &self.forms
    }

    /// The entities a column of this table names.
    pub fn entities(&self, column: &str) -> Entities {
        entities(&column.to_lowercase(), &self.column_prefix)
    }

    /// Whether the column's name ends in an identifier (`id`, `makeid`, `product_code`).
    pub fn identifier(&self, column: &str) -> bool {
        let lower = column.to_lowercase();
        let (ws, had) = strip_id(words(&lower));
        had || ws.is_empty()
    }

    /// How surely `column` identifies this table's rows, by its name: 4 declared as its key,
    /// 3 a bare identifier (`id`, `code`), 1 to 3 an identifier naming the table ([`refers`]:
    /// `stuid` in student, `feature_type_code` in reference_feature_types), 1 an initial and
    /// `id` (`uid` in users); 0 a column that names something else (`merchant_id` in coupons).
    pub fn home(&self, column: &str, declared: bool) -> u8 {
        if declared {
            return 4;
        }
        let e = self.entities(column);
        if e.bare {
            return 3;
        }
        let r = refers(&e, &self.forms);
        if r > 0 {
            return r;
        }
        let c = column.to_lowercase();
        match c.strip_suffix("id") {
            Some(initial) if (1..=2).contains(&initial.len()) && self.name.starts_with(initial) => 1,
            _ => 0,
        }
    }
}

/// The prefix every table name of a schema starts with (`sb` of sbcustomer, sbticker), when
/// there are two or more and it leaves each a name of its own; else empty.
pub fn schema_prefix<'a>(tables: impl Iterator<Item = &'a str> + Clone) -> String {
    if tables.clone().count() < 2 {
        return String::new();
    }
    let lowered: Vec<String> = tables.map(str::to_lowercase).collect();
    let p = common_prefix(lowered.iter().map(String::as_str));
    if p.len() >= MIN_SCHEMA_PREFIX && lowered.iter().all(|t| t.len() > p.len() + 2) {
        p
    } else {
        String::new()
    }
}

/// The entity names a column's name carries once its identifier suffix is off: the words
/// joined and the last word, of the whole name and of the name without its table's column
/// prefix. `bare`: some reading of it is an identifier alone (`id`, `sbcustid` in sbcustomer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Entities {
    pub names: Vec<String>,
    /// Those of `names` that are all the words joined (`claimsummary`, not `summary`).
    pub joined: Vec<String>,
    pub bare: bool,
}

fn entities(column: &str, prefix: &str) -> Entities {
    let mut out = Entities::default();
    let mut readings = vec![column];
    if !prefix.is_empty() && column.len() > prefix.len() {
        if let Some(rest) = column.strip_prefix(prefix) {
            readings.push(rest);
        }
    }
    for r in readings {
        let (ws, _) = strip_id(words(r));
        if ws.is_empty() {
            out.bare = true;
            continue;
        }
        let whole = ws.concat();
        if !out.joined.contains(&whole) {
            out.joined.push(whole.clone());
        }
        for n in [whole, ws[ws.len() - 1].clone()] {
            if !out.names.contains(&n) {
                out.names.push(n);
            }
        }
    }
    out
}

/// Whether entity `e` names form `f`: 2 the same word (up to plural), 1 an abbreviation of
/// it (`stu`, `cont`), or a name ending in it (`caused_by_ship` → ship); else 0.
fn names(e: &str, f: &str) -> u8 {
    let (e, f) = (singular(e), singular(f));
    if e == f {
        2
    } else if (e.len() >= MIN_ABBREVIATION && f.starts_with(&e)) || (f.len() >= MIN_ABBREVIATION && e.ends_with(&f)) {
        1
    } else {
        0
    }
}

/// How strongly a column's entities name a table: 3 all its words are the table's whole name
/// (`claim_summary_id` of claim_summary, `visitor_id` of visitor), 2 its last word is
/// (`caused_by_ship_id` of ship), 1 a word of the table's name or an abbreviation of it
/// (`maker` of car_makers, `stu` of student); else 0.
pub fn refers(e: &Entities, forms: &[(String, u8)]) -> u8 {
    let mut best = 0;
    for name in &e.names {
        let whole = e.joined.contains(name);
        for (f, strength) in forms {
            let level = match names(name, f) {
                2 if *strength == 2 && whole => 3,
                2 => *strength,
                1 => 1,
                _ => 0,
            };
            best = best.max(level);
        }
    }
    best
}

/// How strongly the name of `from_column` (of `from`) says it holds `to_column` of `to`,
/// which identifies `to`'s rows by its name (or is declared its key): 0.95 naming the table
/// whole, 0.9 by its last word, 0.8 by a word or an abbreviation, and 0.05 more for the same
/// name on both sides (a same name alone counts 0.85); None when the names do not relate (and
/// for two bare identifiers: `id` and `id` say nothing).
pub fn link(from: &TableNames, from_column: &str, to: &TableNames, to_column: &str, to_declared: bool) -> Option<f32> {
    if to.home(to_column, to_declared) == 0 {
        return None;
    }
    let e = from.entities(from_column);
    if e.names.is_empty() {
        return None;
    }
    let same = from_column.eq_ignore_ascii_case(to_column);
    let base = match refers(&e, to.forms()) {
        3 => 0.95,
        2 => 0.9,
        1 => 0.8,
        _ if same => 0.8,
        _ => return None,
    };
    Some(if same { base + 0.05 } else { base })
}

/// The tables whose forms an entity may name, found without comparing every pair: the same
/// word, a form it abbreviates (a range of forms starting with it), a form it ends with.
#[derive(Debug, Default)]
pub struct FormIndex {
    forms: BTreeMap<String, Vec<usize>>,
}

impl FormIndex {
    pub fn new<'a>(tables: impl Iterator<Item = &'a TableNames>) -> FormIndex {
        let mut forms: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, t) in tables.enumerate() {
            for (f, _) in t.forms() {
                let v = forms.entry(singular(f)).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
        }
        FormIndex { forms }
    }

    /// Tables some entity of `e` may name (a superset of those [`refers`] accepts).
    pub fn tables(&self, e: &Entities) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for name in &e.names {
            let s = singular(name);
            if s.len() >= MIN_ABBREVIATION {
                for (_, ts) in self.forms.range(s.clone()..).take_while(|(f, _)| f.starts_with(&s)) {
                    out.extend(ts);
                }
            } else if let Some(ts) = self.forms.get(&s) {
                out.extend(ts);
            }
            // forms it ends with, of at least MIN_ABBREVIATION characters
            for (i, _) in s.char_indices().filter(|(i, _)| s.len() - i >= MIN_ABBREVIATION) {
                if let Some(ts) = self.forms.get(&s[i..]) {
                    out.extend(ts);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Columns by lowercased name: where a same-named key may be.
pub fn by_name<'a>(columns: impl Iterator<Item = (usize, usize, &'a str)>) -> HashMap<String, Vec<(usize, usize)>> {
    let mut m: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    for (t, c, name) in columns {
        m.entry(name.to_lowercase()).or_default().push((t, c));
    }
    m
}
