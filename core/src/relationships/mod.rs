//! Relationships nobody declared, read off the data as a DBA would: which columns are keys
//! (unique and never NULL in what was read), and which columns hold another table's key
//! (their names say so, their types compare, and the values read are that key's values).
//! The extension reads bounded samples of each table and checks values it cannot hold in
//! memory through [`Probe`]; the decisions are here, and unit-tested.

mod names;

pub use names::{schema_prefix, singular, words, TableNames};

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Share of a column's sampled values its key must hold for a relationship (dumps and marts
/// keep some rows whose parent is gone).
pub const MIN_CONTAINED: f64 = 0.9;
/// Rows a table needs before uniqueness in them says anything.
pub const MIN_ROWS: i64 = 2;
/// Column pairs tried as a key of a table that has no one-column key.
pub const MAX_PAIRS: usize = 8;
/// Values kept in memory for a whole profiling run, shared out among the columns read: what
/// bounds a backend's memory on a schema of thousands of wide tables (values are at most 64
/// characters).
pub const VALUE_BUDGET: usize = 500_000;
/// Values kept per column, at least and at most.
pub const KEEP_VALUES: (usize, usize) = (20, 1000);

/// Values to keep per column when `columns` are read in all.
pub fn values_per_column(columns: usize) -> usize {
    (VALUE_BUDGET / columns.max(1)).clamp(KEEP_VALUES.0, KEEP_VALUES.1)
}
/// A table larger than the rows to read is sampled by blocks, this many times the share
/// needed (blocks are not all full); then the first rows are taken.
const OVERSAMPLE: f64 = 3.0;

/// How a table is read: at most `limit` rows, by a block sample of `percent` of it when that
/// is below 100. Read whole, one more row than wanted is asked for: getting it tells a table
/// larger than its estimate (or than the rows wanted), which then counts as sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    pub limit: i32,
    pub percent: f64,
}

impl Sampling {
    pub fn for_table(row_estimate: f64, wanted: i32) -> Sampling {
        let percent = if row_estimate > wanted as f64 { 100.0 * OVERSAMPLE * wanted as f64 / row_estimate } else { 100.0 };
        if percent < 100.0 {
            Sampling { limit: wanted, percent }
        } else {
            Sampling { limit: wanted.saturating_add(1), percent: 100.0 }
        }
    }

    /// Whether `rows` read this way are all the table's rows.
    pub fn whole(&self, rows: i64, wanted: i32) -> bool {
        self.percent >= 100.0 && rows <= wanted as i64
    }
}

/// Values that compare with each other: a relationship joins two columns of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Integer,
    Decimal,
    Text,
    Uuid,
}

impl Family {
    /// The family of a type by its pg_type.typname; None for types no key is made of here
    /// (floats, booleans, dates, user-defined types).
    pub fn of(type_name: &str) -> Option<Family> {
        match type_name {
            "int2" | "int4" | "int8" => Some(Family::Integer),
            "numeric" => Some(Family::Decimal),
            "text" | "varchar" | "bpchar" => Some(Family::Text),
            "uuid" => Some(Family::Uuid),
            _ => None,
        }
    }

}

/// What was read of one column.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ColumnProfile {
    pub name: String,
    /// pg_type.typname.
    pub type_name: String,
    /// pg_type.oid.
    #[serde(default)]
    pub type_oid: u32,
    /// A one-column primary key or unique constraint of NOT NULL columns is declared on it.
    #[serde(default)]
    pub declared_unique: bool,
    /// Already holds a declared foreign key.
    #[serde(default)]
    pub declared_reference: bool,
    /// NULLs among the rows read.
    #[serde(default)]
    pub nulls: i64,
    /// Distinct non-NULL values among the rows read.
    #[serde(default)]
    pub distinct: i64,
    /// Some of those values, printed by their type's output function (all of them when
    /// `distinct` is not larger).
    #[serde(default)]
    pub values: Vec<String>,
}

impl ColumnProfile {
    fn family(&self) -> Option<Family> {
        Family::of(&self.type_name)
    }

    /// Every distinct value read is in `values`.
    fn all_values(&self) -> bool {
        self.values.len() as i64 >= self.distinct
    }
}

/// What was read of one table.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TableProfile {
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// Rows read.
    pub rows: i64,
    /// The rows read are all the table's rows.
    pub complete: bool,
    /// A primary key is declared.
    #[serde(default)]
    pub declared_key: bool,
    /// The owning role's OID. Relationships are inferred only between tables of one owner:
    /// another owner's table of the same name is no evidence about this one's data (it could
    /// be planted to steer others' joins, or to learn what a column it cannot read holds).
    #[serde(default)]
    pub owner: u32,
    pub columns: Vec<ColumnProfile>,
}

impl TableProfile {
    /// Whether column `c` is a key in what was read: unique and never NULL in two rows or more.
    fn unique_in_data(&self, c: usize) -> bool {
        let col = &self.columns[c];
        self.rows >= MIN_ROWS && col.nulls == 0 && col.distinct == self.rows
    }

    fn is_key(&self, c: usize) -> bool {
        self.columns[c].declared_unique || self.unique_in_data(c)
    }

    fn read_how(&self) -> String {
        if self.complete {
            format!("all {} rows", self.rows)
        } else {
            format!("a sample of {} rows", self.rows)
        }
    }
}

/// What the extension checks in the database for the decisions here.
pub trait Probe {
    /// How many of `values` some row of the table's column holds; None when that could not be
    /// told in the time allowed.
    fn found(&mut self, table: &TableProfile, column: &ColumnProfile, values: &[String]) -> Option<usize>;

    /// For each pair of columns, the distinct non-NULL pairs among the rows read (the same
    /// sample as the profile when the table is large); None where it could not be told.
    fn distinct_pairs(&mut self, table: &TableProfile, pairs: &[(usize, usize)]) -> Vec<Option<i64>>;
}

/// A key found in the data of a table with no primary key declared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Key {
    pub table: usize,
    pub columns: Vec<usize>,
    pub score: f32,
    pub evidence: String,
}

/// A (from, to) pair of (table, column) indexes.
type Pair = ((usize, usize), (usize, usize));

/// A relationship found: `from`'s column holds values of `to`'s key column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub from: (usize, usize),
    pub to: (usize, usize),
    pub score: f32,
    pub evidence: String,
}

#[derive(Debug, Default, Serialize)]
pub struct Findings {
    pub keys: Vec<Key>,
    pub links: Vec<Link>,
    /// Pairs whose names relate but whose values could not be checked in time.
    pub unchecked: Vec<((usize, usize), (usize, usize))>,
}

/// The keys and relationships the profiles show. A column that holds a declared foreign key
/// is left alone: the declaration is the truth about it.
pub fn infer(tables: &[TableProfile], probe: &mut dyn Probe) -> Findings {
    let names = table_names(tables);
    let mut out = Findings::default();
    let candidates = candidates(tables, &names);
    let mut checked: HashMap<Pair, Option<f64>> = HashMap::new();
    let mut links: Vec<(Link, u8)> = Vec::new();
    for (step, (from, targets)) in candidates.into_iter().enumerate() {
        crate::interrupt::every(step, 64);
        let mut best: Vec<(Link, u8)> = Vec::new();
        for (to, strength) in targets {
            let contained = *checked.entry((from, to)).or_insert_with(|| containment(tables, from, to, probe));
            let Some(share) = contained else {
                out.unchecked.push((from, to));
                continue;
            };
            if share < MIN_CONTAINED {
                continue;
            }
            let home = names[to.0].home(&tables[to.0].columns[to.1].name, tables[to.0].columns[to.1].declared_unique);
            let link = Link { from, to, score: (strength as f64 * share) as f32, evidence: evidence(tables, from, to, share) };
            match best.first() {
                Some((b, _)) if b.score > link.score + f32::EPSILON => {}
                Some((b, _)) if (b.score - link.score).abs() <= f32::EPSILON => best.push((link, home)),
                _ => best = vec![(link, home)],
            }
        }
        links.extend(best);
    }
    out.links = one_way(links);
    out.keys = keys(tables, &names, &out.links, probe);
    out
}

/// Each table's names, with its schema's common prefix.
fn table_names(tables: &[TableProfile]) -> Vec<TableNames> {
    let mut prefixes: HashMap<&str, String> = HashMap::new();
    for schema in tables.iter().map(|t| t.schema.as_str()) {
        if !prefixes.contains_key(schema) {
            let p = schema_prefix(tables.iter().filter(|t| t.schema == schema).map(|t| t.name.as_str()));
            prefixes.insert(schema, p);
        }
    }
    tables
        .iter()
        .map(|t| {
            let cols: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
            TableNames::new(&t.name, &cols, &prefixes[t.schema.as_str()])
        })
        .collect()
}

/// For each column that may hold another table's key, the key columns its name points to
/// with the strength of that, found through indexes of names rather than by trying all pairs.
#[allow(clippy::type_complexity)]
fn candidates(tables: &[TableProfile], names: &[TableNames]) -> Vec<((usize, usize), Vec<((usize, usize), f32)>)> {
    let index = names::FormIndex::new(names.iter());
    // a column holding a declared foreign key is another table's key, not its own table's
    // (unless declared unique too: a one-to-one extension of the table it references)
    let target = |t: &TableProfile, c: usize| {
        let col = &t.columns[c];
        col.family().is_some() && t.is_key(c) && (!col.declared_reference || col.declared_unique)
    };
    let keys_of: Vec<Vec<usize>> = tables.iter().map(|t| (0..t.columns.len()).filter(|&c| target(t, c)).collect()).collect();
    let same_name = names::by_name(
        tables.iter().enumerate().flat_map(|(ti, t)| keys_of[ti].iter().map(move |&c| (ti, c, t.columns[c].name.as_str()))),
    );
    let mut out = Vec::new();
    let mut step = 0usize;
    for (ti, t) in tables.iter().enumerate() {
        for (ci, col) in t.columns.iter().enumerate() {
            step += 1;
            crate::interrupt::every(step, 1024);
            let Some(family) = col.family() else { continue };
            if col.declared_reference || col.distinct == 0 {
                continue;
            }
            let e = names[ti].entities(&col.name);
            if e.names.is_empty() {
                continue;
            }
            let mut to: Vec<(usize, usize)> = same_name.get(&col.name.to_lowercase()).cloned().unwrap_or_default();
            for t2 in index.tables(&e) {
                to.extend(keys_of[t2].iter().map(|&c| (t2, c)));
            }
            to.sort_unstable();
            to.dedup();
            let mut targets = Vec::new();
            for (t2, c2) in to {
                let key = &tables[t2].columns[c2];
                if (t2, c2) == (ti, ci) || key.family() != Some(family) || tables[t2].owner != t.owner {
                    continue;
                }
                if let Some(s) = names::link(&names[ti], &col.name, &names[t2], &key.name, key.declared_unique) {
                    targets.push(((t2, c2), s, names[t2].home(&key.name, key.declared_unique)));
                }
            }
            // only the strongest names are worth checking against the data; among those, the
            // column that identifies its table best (lead_target.id, not lead_target's own
            // reference customer_target_id), and a table of the column's own schema before
            // another schema's of the same name
            if let Some(top) = targets.iter().map(|(_, s, _)| *s).reduce(f32::max) {
                targets.retain(|(_, s, _)| *s >= top);
                let home = targets.iter().map(|(_, _, h)| *h).max().unwrap_or(0);
                targets.retain(|(_, _, h)| *h == home);
                if targets.iter().any(|((t2, _), _, _)| tables[*t2].schema == t.schema) {
                    targets.retain(|((t2, _), _, _)| tables[*t2].schema == t.schema);
                }
                out.push(((ti, ci), targets.into_iter().map(|(to, s, _)| (to, s)).collect()));
            }
        }
    }
    out
}

/// The share of `from`'s sampled values that `to` holds: counted here when every value of `to`
/// was read, else asked of the database. None when the database could not tell in time.
fn containment(tables: &[TableProfile], from: (usize, usize), to: (usize, usize), probe: &mut dyn Probe) -> Option<f64> {
    let f = &tables[from.0].columns[from.1];
    let (tt, k) = (&tables[to.0], &tables[to.0].columns[to.1]);
    if f.values.is_empty() {
        return Some(0.0);
    }
    let found = if tt.complete && k.all_values() {
        let held: HashSet<&str> = k.values.iter().map(String::as_str).collect();
        f.values.iter().filter(|v| held.contains(v.as_str())).count()
    } else {
        probe.found(tt, k, &f.values)?
    };
    Some(found as f64 / f.values.len() as f64)
}

fn evidence(tables: &[TableProfile], from: (usize, usize), to: (usize, usize), share: f64) -> String {
    let (ft, tt) = (&tables[from.0], &tables[to.0]);
    let (f, k) = (&ft.columns[from.1], &tt.columns[to.1]);
    let n = f.values.len();
    let found = (share * n as f64).round() as usize;
    let key = if k.declared_unique {
        "its declared key".to_string()
    } else {
        format!("unique and not null in {}", tt.read_how())
    };
    format!(
        "names: {}.{} → {}.{}; {found} of {n} distinct values read of {}.{} are in {}.{} ({key})",
        ft.name, f.name, tt.name, k.name, ft.name, f.name, tt.name, k.name
    )
}

/// Keeps one direction of two columns found to hold each other's values (one-to-one): the
/// one whose target is the better home of the value by name (pets.petid, not has_pet.petid);
/// on a tie, the first found.
fn one_way(links: Vec<(Link, u8)>) -> Vec<Link> {
    let at: HashMap<Pair, u8> = links.iter().map(|(l, h)| ((l.from, l.to), *h)).collect();
    let mut kept = Vec::new();
    let mut seen: HashSet<((usize, usize), (usize, usize))> = HashSet::new();
    for (l, home) in links {
        match at.get(&(l.to, l.from)) {
            Some(&back) if back > home => continue,
            Some(&back) if back == home && seen.contains(&(l.to, l.from)) => continue,
            _ => {}
        }
        seen.insert((l.from, l.to));
        kept.push(l);
    }
    kept
}

/// The key of each table that has no primary key declared: the one-column key whose name
/// says it identifies the rows (an identifier, or one naming the table) or a relationship
/// points to; else, when no column is unique alone, a pair of columns unique together where
/// one of them holds another table's key (a bridge or a fact table).
fn keys(tables: &[TableProfile], names: &[TableNames], links: &[Link], probe: &mut dyn Probe) -> Vec<Key> {
    let targeted: HashSet<(usize, usize)> = links.iter().map(|l| l.to).collect();
    let mut out = Vec::new();
    for (ti, t) in tables.iter().enumerate() {
        crate::interrupt::every(ti, 256);
        if t.declared_key || t.columns.iter().any(|c| c.declared_unique) {
            continue;
        }
        let unique: Vec<usize> = (0..t.columns.len()).filter(|&c| t.columns[c].family().is_some() && t.unique_in_data(c)).collect();
        // an identifier by its name first (`modelid` before `model`), then one naming the
        // table, then one a relationship points to
        let single = unique
            .iter()
            .map(|&c| {
                let n = &t.columns[c].name;
                (c, names[ti].identifier(n), names[ti].home(n, false), targeted.contains(&(ti, c)))
            })
            .filter(|&(_, identifier, home, targeted)| identifier || home > 0 || targeted)
            .max_by_key(|&(c, identifier, home, targeted)| (identifier, home, targeted, std::cmp::Reverse(c)));
        if let Some((c, ..)) = single {
            let score = if t.complete { 1.0 } else { 0.8 };
            out.push(Key { table: ti, columns: vec![c], score, evidence: format!("unique and not null in {}", t.read_how()) });
            continue;
        }
        // a column unique alone makes every pair with it unique: no key of two
        if unique.is_empty() {
            if let Some(k) = pair_key(ti, t, links, probe) {
                out.push(k);
            }
        }
    }
    out
}

/// Two columns unique together, one of them holding another table's key: a bridge table's
/// (stuid, petid) or a fact table's (tickerid, date).
fn pair_key(ti: usize, t: &TableProfile, links: &[Link], probe: &mut dyn Probe) -> Option<Key> {
    if t.rows < MIN_ROWS {
        return None;
    }
    let refs: Vec<usize> =
        links.iter().filter(|l| l.from.0 == ti && t.columns[l.from.1].nulls == 0).map(|l| l.from.1).collect();
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for &a in &refs {
        for b in 0..t.columns.len() {
            let col = &t.columns[b];
            if b != a && col.nulls == 0 && !pairs.contains(&(b.min(a), b.max(a))) && pairs.len() < MAX_PAIRS {
                pairs.push((a.min(b), a.max(b)));
            }
        }
    }
    if pairs.is_empty() {
        return None;
    }
    // a pair of two referencing columns first: a bridge table's key
    pairs.sort_by_key(|&(a, b)| !(refs.contains(&a) && refs.contains(&b)));
    let counts = probe.distinct_pairs(t, &pairs);
    let (a, b) = pairs.iter().zip(counts).find(|(_, n)| *n == Some(t.rows)).map(|(p, _)| *p)?;
    let score = if t.complete { 1.0 } else { 0.8 };
    Some(Key { table: ti, columns: vec![a, b], score, evidence: format!("unique together and not null in {}", t.read_how()) })
}

#[cfg(test)]
mod tests;
