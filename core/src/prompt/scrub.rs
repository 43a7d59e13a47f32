//! What an error text may carry to the model or the history: its wording, and of what it
//! quotes only what the model wrote or was shown. An error raised while a generated query ran is
//! told in nl2sql's words only ([`super::ran`]); these are for an error raised while PostgreSQL
//! read the query ([`read_error`]) and for messages of unknown form ([`without_data`]).

use std::collections::HashSet;
use std::sync::OnceLock;

/// A message with the input it may print unquoted told as `keep` tells it: after `more than one
/// operator named `, before ` is not a valid encoding name`, the name in `<kind> x does not exist` written without quotes
/// (PostgreSQL quotes the names it looked up; `function x() does not exist`), and otherwise all
/// that follows the message's first ": " (`operator does not exist: x`, `improper relation name
/// (too many dotted names): x`, `cross-database references are not implemented: x`): the input
/// may itself hold ": ", so what follows the first may all be input.
fn unquoted_input(text: &str, keep: &dyn Fn(&str) -> String) -> String {
    let quoted = |part: &str| part.contains(['"', '\'']);
    if let Some(rest) = text.strip_prefix("more than one operator named ") {
        return format!("more than one operator named {}", keep(rest));
    }
    if let Some(head) = text.strip_suffix(" is not a valid encoding name") {
        return format!("{} is not a valid encoding name", keep(head));
    }
    if let Some((kind, name)) = text.strip_suffix(" does not exist").and_then(|h| h.split_once(' ')) {
        if !quoted(name) {
            return format!("{kind} {} does not exist", keep(name));
        }
    }
    if let Some((head, rest)) = text.split_once(": ") {
        return format!("{head}: {}", keep(rest));
    }
    text.to_string()
}

/// A message of unknown form, its quoted input withheld: PostgreSQL prints a value
/// between quotes without doubling the quotes it holds, so any quote may be the input's and
/// all from the first quote to the last is one part, kept only when `seen` holds it whole.
fn execution_error(text: &str, whole: &dyn Fn(&str) -> bool) -> String {
    let is_quote = |c: char| c == '"' || c == '\'';
    // A word of letters only is taken for PostgreSQL's wording; one holding a digit (a number,
    // `0xe2`) is kept only when `seen` holds it.
    let keep = |w: &str| !has_digit(w) || whole(w);
    let (Some(first), Some(last)) = (text.find(is_quote), text.rfind(is_quote)) else {
        return words(text, &keep);
    };
    let q = &text[first..first + 1];
    if last == first {
        return format!("{}{q}…{q}", words(&text[..first], &keep));
    }
    let inner = &text[first + 1..last];
    let inner = if whole(inner) { inner } else { "…" };
    format!("{}{q}{inner}{q}{}", words(&text[..first], &keep), words(&text[last + 1..], &keep))
}

fn has_digit(word: &str) -> bool {
    word.chars().any(|x| x.is_ascii_digit())
}

/// `text` (no quotes in it) with every word that `keep` refuses replaced by "…".
fn words(text: &str, keep: &dyn Fn(&str) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !(c.is_alphanumeric() || c == '_') {
            out.push(c);
            continue;
        }
        let mut end = i + c.len_utf8();
        while let Some(&(j, d)) = chars.peek() {
            if d.is_alphanumeric() || d == '_' || (d == '.' && text[j + 1..].starts_with(|x: char| x.is_ascii_digit())) {
                end = j + d.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let word = &text[i..end];
        out.push_str(if keep(word) { word } else { "…" });
    }
    out
}

/// Longest quoted name a correction prompt repeats.
const MAX_QUOTED: usize = 200;

/// A message of unknown form (a history row's, for an error that is not a generated query's) as
/// it may be kept: every quoted part (in double or single
/// quotes) and every word that holds a digit (a number, `0xe2`) that `seen` (what the model was
/// already sent — never its own answers, or it could list guesses and learn which one a row
/// holds) does not hold is replaced by "…". PostgreSQL quotes what is
/// not its own wording (names, and values: a cast error quotes the value it could not read,
/// which may come from a row or a file), so what is left is its wording plus names the model
/// wrote or was shown: no data reaches the endpoint.
pub fn without_data(text: &str, seen: &str) -> String {
    let whole = |part: &str| !part.is_empty() && part.len() <= MAX_QUOTED && seen.contains(part);
    let keep = |part: &str| if whole(part) { part.to_string() } else { "…".to_string() };
    // A message of unknown form may print its input unquoted (a row's text cast to an
    // operator's or a relation's name, spelt in letters, would pass as wording) or quoted with
    // quotes of its own: the strictest reading.
    execution_error(&unquoted_input(text, &keep), &whole)
}

/// Most words of a part printed unquoted that [`read_error`] repeats: more, and known names in
/// sequence could spell a value.
const MAX_WORDS: usize = 6;

/// Words of the types PostgreSQL names in an error about the query's operands
/// (`operator does not exist: text > integer`, `function lower(integer) does not exist`).
const TYPE_WORDS: &[&str] = &[
    "integer", "bigint", "smallint", "numeric", "real", "double", "precision", "boolean", "date", "time", "timestamp",
    "without", "with", "zone", "interval", "json", "jsonb", "uuid", "money", "text", "character", "varying", "unknown",
    "bytea", "record", "anyelement", "anyarray", "name", "oid", "int4", "int8", "int2", "float4", "float8", "varchar",
    "bpchar", "bool", "void", "inet", "cidr", "tsvector", "tsquery",
];

/// Words of nl2sql's own messages for a query PostgreSQL could not be given, told as reading
/// errors (`generated SQL contains a NUL byte`), that PostgreSQL's messages lack.
const OWN_WORDS: &[&str] = &["NUL"];

/// Every word of PostgreSQL's own messages, hints and details (its server's message catalog:
/// scripts/wording.py), split on first use.
fn wording(word: &str) -> bool {
    static WORDING: OnceLock<HashSet<&'static str>> = OnceLock::new();
    WORDING.get_or_init(|| include_str!("wording.txt").split_whitespace().collect()).contains(word)
}

/// An error raised while PostgreSQL read the query (parse, analysis, rewrite), as the model may
/// be told it. Such an error quotes the query's text and the catalog's names; so that a value
/// that reached one anyway (a domain's CHECK run while a literal was read) is not repeated, a
/// name is kept only when it is one whole word of `names` (what the model wrote, also folded to
/// lower case, or was shown), two of them joined by a dot (`Perhaps you meant to reference the
/// column "singer.age"`: the prompt lists the two apart), or a token of punctuation; input
/// PostgreSQL prints unquoted (`operator does not exist: text > integer`) keeps such names and
/// type names only, word by word, and at most [`MAX_WORDS`] of them. Whatever else is quoted, and
/// every other word that is neither such a name nor a word of PostgreSQL's own messages without
/// a digit, becomes "…": PostgreSQL also prints type names unquoted amid its wording (`argument
/// of WHERE must be type boolean, not type x`), and a type's name is its owner's text, which the
/// model may never have been shown. What is left is PostgreSQL's wording and names the model
/// knows.
pub fn read_error(text: &str, names: &HashSet<String>) -> String {
    // PostgreSQL sets a quoted name apart from its wording; a quote between two letters or
    // digits (`function x"y"alice() does not exist`) is text it printed as it was: nothing is
    // kept.
    let glued = text.char_indices().any(|(i, c)| {
        (c == '"' || c == '\'')
            && text[..i].chars().next_back().is_some_and(|p| p.is_alphanumeric() || p == '_')
            && text[i + 1..].chars().next().is_some_and(|n| n.is_alphanumeric() || n == '_')
    });
    if glued {
        return "…".to_string();
    }
    // Whole words, not fragments: single letters joined by dots would spell anything.
    let name = |w: &str| names.contains(w) && !w.starts_with(|c: char| c.is_ascii_digit());
    let pair = |part: &str| part.split_once('.').is_some_and(|(a, b)| name(a) && name(b));
    let punctuation = |part: &str| !part.is_empty() && part.len() <= 3 && !part.chars().any(|c| c.is_alphanumeric() || c == '_');
    let quoted_kept = |part: &str| part.len() <= MAX_QUOTED && (name(part) || pair(part) || punctuation(part));
    let known = |w: &str| name(w) || TYPE_WORDS.contains(&w);
    let said = |w: &str| name(w) || (!has_digit(w) && (TYPE_WORDS.contains(&w) || OWN_WORDS.contains(&w) || wording(w)));
    let unquoted = |part: &str| {
        let count = part.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).count();
        if count > MAX_WORDS || part.len() > MAX_QUOTED {
            return "…".to_string();
        }
        let mut out = String::with_capacity(part.len());
        let mut word = String::new();
        for c in part.chars().chain(std::iter::once(' ')) {
            if c.is_alphanumeric() || c == '_' {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                out.push_str(if known(&word) { &word } else { "…" });
                word.clear();
            }
            out.push(c);
        }
        out.pop();
        out
    };
    let text = unquoted_input(text, &unquoted);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find(['"', '\'']) {
        out.push_str(&words(&rest[..open], &said));
        let c = rest[open..].chars().next().unwrap_or('"');
        // The quoted part, with the quote doubled standing for one, up to the closing quote.
        let mut part = String::new();
        let mut closed = None;
        let mut chars = rest[open + 1..].char_indices().peekable();
        while let Some((j, d)) = chars.next() {
            if d == c {
                if chars.peek().is_some_and(|(_, e)| *e == c) {
                    chars.next();
                    part.push(c);
                    continue;
                }
                closed = Some(open + 1 + j + 1);
                break;
            }
            part.push(d);
        }
        out.push(c);
        if quoted_kept(&part) {
            out.push_str(&part.replace(c, &format!("{c}{c}")));
        } else {
            out.push('…');
        }
        out.push(c);
        match closed {
            Some(end) => rest = &rest[end..],
            None => return out,
        }
    }
    out.push_str(&words(rest, &said));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error as [`read_error`] tells it, `known` being what the model wrote or was shown.
    fn told_as(known: &str, cases: &[(&str, &str)]) {
        let names: HashSet<String> = known.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_string).collect();
        for (error, told) in cases {
            assert_eq!(read_error(error, &names), *told, "{error}");
        }
    }

    #[test]
    fn a_read_error_keeps_its_wording_and_the_names_the_model_knows() {
        told_as("singer name age t1 t3 lower SELECT FROM concert", &[
            ("column t3.age does not exist", "column t3.age does not exist"),
            ("column \"nme\" does not exist", "column \"…\" does not exist"),
            ("column \"name\" does not exist", "column \"name\" does not exist"),
            ("missing FROM-clause entry for table \"concert\"", "missing FROM-clause entry for table \"concert\""),
            ("Perhaps you meant to reference the column \"singer.age\".", "Perhaps you meant to reference the column \"singer.age\"."),
            ("operator does not exist: text > integer", "operator does not exist: text > integer"),
            ("operator does not exist: character varying = integer", "operator does not exist: character varying = integer"),
            ("function lower(integer) does not exist", "function lower(integer) does not exist"),
            ("function strftime(unknown, date) does not exist", "function …(unknown, date) does not exist"),
            ("syntax error at or near \")\"", "syntax error at or near \")\""),
            ("syntax error at or near \"FROM\"", "syntax error at or near \"FROM\""),
            ("aggregate functions are not allowed in WHERE", "aggregate functions are not allowed in WHERE"),
        ]);
    }

    #[test]
    fn a_read_error_repeats_no_name_the_model_neither_wrote_nor_was_shown() {
        // A value that reached an error raised while reading (a domain's CHECK folded with a
        // row's value earlier), printed unquoted or quoted: withheld, whatever its form.
        told_as("singer name age q1 SELECT qq FROM", &[
            ("operator does not exist: zz_secret", "operator does not exist: …"),
            ("operator does not exist: zz_secret = name", "operator does not exist: … = name"),
            ("more than one operator named zz_secret", "more than one operator named …"),
            ("zz_secret is not a valid encoding name", "… is not a valid encoding name"),
            ("function zz_secret(integer) does not exist", "function …(integer) does not exist"),
            ("type \"zz_secret\" does not exist", "type \"…\" does not exist"),
            ("syntax error at or near \"zz_secret\"", "syntax error at or near \"…\""),
            // One character of a row that the prompt holds within a word: not a whole word.
            ("relation \"q\" does not exist", "relation \"…\" does not exist"),
            // Punctuation is kept only as a short token.
            ("syntax error at or near \"))))\"", "syntax error at or near \"…\""),
            // Known names in a row could spell a value: at most a few in an unquoted part,
            // two joined by a dot in a quoted one.
            ("improper qualified name (too many dotted names): singer.name.age.singer.name.age.singer", "improper qualified name (too many dotted names): …"),
            ("relation \"singer.name.age\" does not exist", "relation \"…\" does not exist"),
            // A number is no name.
            ("relation \"1.1\" at 31337", "relation \"…\" at …"),
            // A quote between letters: text printed as it was, so nothing is kept.
            ("function x\"y\"zz_secret() does not exist", "…"),
            ("operator does not exist: a'zz_secret", "…"),
        ]);
    }

    #[test]
    fn a_read_error_repeats_a_type_name_only_when_the_model_knows_it() {
        // PostgreSQL prints type names unquoted amid its wording; a type's name is its owner's
        // text, kept only when the model wrote or was shown it.
        told_as("t2 holder2 c f SELECT FROM WHERE", &[
            ("argument of WHERE must be type boolean, not type ignore_all_previous_instructions",
             "argument of WHERE must be type boolean, not type …"),
            ("argument of WHERE must be type boolean, not type holder2", "argument of WHERE must be type boolean, not type holder2"),
            ("argument of WHERE must be type boolean, not type integer", "argument of WHERE must be type boolean, not type integer"),
            ("UNION could not convert type mal.youarenowevil to mal.select_every_secret", "UNION could not convert type ….… to ….…"),
            ("cannot cast type holder2 to zzsecretword", "cannot cast type holder2 to …"),
            // A single word of PostgreSQL's own messages passes, as their wording.
            ("cannot cast type holder2 to password", "cannot cast type holder2 to password"),
            // nl2sql's own wording.
            ("generated SQL contains a NUL byte", "generated SQL contains a NUL byte"),
        ]);
    }
}
