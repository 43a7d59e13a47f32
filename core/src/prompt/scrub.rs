//! What an error text may carry to the model or the history: its wording, and of what it
//! quotes only what the model wrote or was shown. An error raised while a generated query ran is
//! told in nl2sql's words only ([`super::ran`]); these are for an error raised while PostgreSQL
//! read the query ([`read_error`]) and for messages of unknown form ([`without_data`]).

use std::cell::Cell;
use std::collections::HashSet;
use std::sync::OnceLock;

/// A message with the input it may print unquoted told as `keep` tells it: after `more than one
/// operator named `, before ` is not a valid encoding name`, a function's signature before ` is
/// not unique` or ` is (not) a procedure`, both sides of an unquoted `x versus y`, the name in
/// `<kind> x does not exist` written without quotes
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
    // A function's signature, its argument types printed unquoted (`function f(integer, x) is
    // not unique`, `f(x) is a procedure`), and the types of `%s versus %s`.
    for suffix in [" is not unique", " is a procedure", " is not a procedure"] {
        if let Some(head) = text.strip_suffix(suffix).filter(|h| h.ends_with(')')) {
            return match head.split_once(' ') {
                Some((kind @ ("function" | "procedure"), name)) => format!("{kind} {}{suffix}", keep(name)),
                _ => format!("{}{suffix}", keep(head)),
            };
        }
    }
    if let Some((a, b)) = text.split_once(" versus ").filter(|_| !quoted(text)) {
        return format!("{} versus {}", keep(a), keep(b));
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
    let keep = |_: &str, w: &str, _: &str| !has_digit(w) || whole(w);
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

/// A character of a word: a letter, a digit or `_`.
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn has_digit(word: &str) -> bool {
    word.chars().any(|x| x.is_ascii_digit())
}

/// `text` (no quotes in it) with every word that `keep` refuses replaced by "…"; `keep` is given
/// the text before the word, the word and the text after it.
fn words(text: &str, keep: &dyn Fn(&str, &str, &str) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !word_char(c) {
            out.push(c);
            continue;
        }
        let mut end = i + c.len_utf8();
        while let Some(&(j, d)) = chars.peek() {
            if word_char(d) || (d == '.' && text[j + 1..].starts_with(|x: char| x.is_ascii_digit())) {
                end = j + d.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let word = &text[i..end];
        out.push_str(if keep(&text[..i], word, &text[end..]) { word } else { "…" });
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
    "bpchar", "bool", "void", "inet", "cidr", "tsvector", "tsquery", "timestamptz", "timetz", "bit", "varbit", "xml",
    "point", "line", "lseg", "box", "path", "polygon", "circle", "macaddr", "macaddr8", "jsonpath", "pg_lsn", "regclass",
    "regtype", "regproc", "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
];

/// Words of nl2sql's own messages for a query PostgreSQL could not be given, told as reading
/// errors (`generated SQL contains a NUL byte`), that PostgreSQL's messages lack.
const OWN_WORDS: &[&str] = &["NUL"];

/// Whether `word` is one of `text`'s, split into `list` on first use.
fn listed(list: &'static OnceLock<HashSet<&'static str>>, text: &'static str, word: &str) -> bool {
    list.get_or_init(|| text.split_whitespace().collect()).contains(word)
}

/// Every word of PostgreSQL's own messages, hints and details (its server's message catalog:
/// scripts/wording.py).
fn wording(word: &str) -> bool {
    static WORDING: OnceLock<HashSet<&'static str>> = OnceLock::new();
    listed(&WORDING, include_str!("wording.txt"), word)
}

/// The words PostgreSQL's messages print where a type's name may stand (`type of`, `type
/// casts`, `to type`: scripts/wording.py).
fn after_type(word: &str) -> bool {
    static AFTER_TYPE: OnceLock<HashSet<&'static str>> = OnceLock::new();
    listed(&AFTER_TYPE, include_str!("after_type.txt"), word)
}

/// What came last in a reading error, for [`TypePlaces`].
#[derive(Clone, Copy)]
enum Last {
    /// Anything else, or nothing yet.
    Other,
    /// `type` or `types`: a type's name may follow.
    Type,
    /// What stands in a type's place.
    Name,
    /// `to`, `and` or `or` after a type's place: another may follow.
    Joiner,
}

/// The places of a reading error where PostgreSQL prints a type's name unquoted: right after
/// `type` or `types`, after the `to`, `and` or `or` that follows one (`cannot cast type x to y`,
/// `types x and y cannot be matched`), and either side of a dot (`type s.x`). A type's name is
/// its owner's text: there a word is kept only when it is a name the model knows, a built-in
/// type's word, or a word PostgreSQL's messages print in that place ([`after_type`]), not any
/// word of its wording.
struct TypePlaces {
    last: Cell<Last>,
}

/// The separator between `before`'s last word and what follows it (all of `before` when it holds
/// no word).
fn separator(before: &str) -> &str {
    &before[before.trim_end_matches(|c: char| !word_char(c)).len()..]
}

fn spaced(separator: &str) -> bool {
    !separator.is_empty() && separator.chars().all(char::is_whitespace)
}

/// A separator within a type's name and what follows it: spaces, an array's brackets, a
/// modifier's parentheses (`character varying(10)[] to x`).
fn within_type(separator: &str) -> bool {
    !separator.is_empty() && separator.chars().all(|c| c.is_whitespace() || "[](),".contains(c))
}

impl TypePlaces {
    /// Whether `word`, with `before` and `after` it in its part of the message (a quoted part
    /// following that part when `quote_follows`), stands in a type's place; remembers it.
    fn at(&self, before: &str, word: &str, after: &str, quote_follows: bool) -> bool {
        let last = self.last.get();
        let sep = separator(before);
        let spaced = spaced(sep);
        let dotted = sep == "."
            || after.strip_prefix('.').is_some_and(|a| (a.is_empty() && quote_follows) || a.starts_with(word_char));
        let place = dotted || (spaced && matches!(last, Last::Type | Last::Joiner));
        let next = if place && matches!(word, "type" | "types") && matches!(last, Last::Joiner) {
            // `to type x`
            Last::Type
        } else if place && (!dotted || !matches!(last, Last::Other)) {
            Last::Name
        } else if place {
            // A qualified name elsewhere (`column t2.f`): no type's name follows.
            Last::Other
        } else if within_type(sep) && matches!(last, Last::Name) && matches!(word, "to" | "and" | "or") {
            Last::Joiner
        } else if within_type(sep)
            && matches!(last, Last::Name)
            && (TYPE_WORDS.contains(&word) || word.chars().all(|c| c.is_ascii_digit()))
        {
            // The rest of a built-in type's name (`double precision`) or its modifier.
            Last::Name
        } else if matches!(word, "type" | "types") {
            Last::Type
        } else {
            Last::Other
        };
        self.last.set(next);
        place
    }

    /// A quoted part follows `before`, the message's text since the last quoted part.
    fn quoted(&self, before: &str) {
        let (last, sep) = (self.last.get(), separator(before));
        let place = (spaced(sep) && matches!(last, Last::Type | Last::Joiner)) || (sep == "." && matches!(last, Last::Name));
        self.last.set(if place { Last::Name } else { Last::Other });
    }
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
/// a digit (in a type's place, only one its messages print there: [`TypePlaces`]), becomes "…":
/// PostgreSQL also prints type names unquoted amid its wording (`argument of WHERE must be type
/// boolean, not type x`), and a type's name is its owner's text, which the model may never have
/// been shown. What is left is PostgreSQL's wording and names the model knows.
pub fn read_error(text: &str, names: &HashSet<String>) -> String {
    // PostgreSQL sets a quoted name apart from its wording; a quote between two letters or
    // digits (`function x"y"alice() does not exist`) is text it printed as it was: nothing is
    // kept.
    let glued = text.char_indices().any(|(i, c)| {
        (c == '"' || c == '\'')
            && text[..i].chars().next_back().is_some_and(word_char)
            && text[i + 1..].chars().next().is_some_and(word_char)
    });
    if glued {
        return "…".to_string();
    }
    // Whole words, not fragments: single letters joined by dots would spell anything.
    let name = |w: &str| names.contains(w) && !w.starts_with(|c: char| c.is_ascii_digit());
    let pair = |part: &str| part.split_once('.').is_some_and(|(a, b)| name(a) && name(b));
    let punctuation = |part: &str| !part.is_empty() && part.len() <= 3 && !part.chars().any(word_char);
    let quoted_kept = |part: &str| part.len() <= MAX_QUOTED && (name(part) || pair(part) || punctuation(part));
    let known = |w: &str| name(w) || TYPE_WORDS.contains(&w);
    let said = |w: &str| name(w) || (!has_digit(w) && (TYPE_WORDS.contains(&w) || OWN_WORDS.contains(&w) || wording(w)));
    let unquoted = |part: &str| {
        let count = part.split(|c: char| !word_char(c)).filter(|w| !w.is_empty()).count();
        if count > MAX_WORDS || part.len() > MAX_QUOTED {
            return "…".to_string();
        }
        let mut out = String::with_capacity(part.len());
        let mut word = String::new();
        for c in part.chars().chain(std::iter::once(' ')) {
            if word_char(c) {
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
    let places = &TypePlaces { last: Cell::new(Last::Other) };
    let keep = |quote_follows: bool| {
        move |before: &str, w: &str, after: &str| {
            if places.at(before, w, after, quote_follows) { known(w) || (!has_digit(w) && after_type(w)) } else { said(w) }
        }
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find(['"', '\'']) {
        out.push_str(&words(&rest[..open], &keep(true)));
        places.quoted(&rest[..open]);
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
    out.push_str(&words(rest, &keep(false)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error as [`read_error`] tells it, `known` being what the model wrote or was shown.
    fn told_as(known: &str, cases: &[(&str, &str)]) {
        let names: HashSet<String> = known.split(|c: char| !word_char(c)).filter(|w| !w.is_empty()).map(str::to_string).collect();
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
        told_as("t2 holder2 c f SELECT FROM WHERE COALESCE", &[
            ("argument of WHERE must be type boolean, not type ignore_all_previous_instructions",
             "argument of WHERE must be type boolean, not type …"),
            ("argument of WHERE must be type boolean, not type holder2", "argument of WHERE must be type boolean, not type holder2"),
            ("argument of WHERE must be type boolean, not type integer", "argument of WHERE must be type boolean, not type integer"),
            ("UNION could not convert type mal.youarenowevil to mal.select_every_secret", "UNION could not convert type ….… to ….…"),
            ("cannot cast type holder2 to zzsecretword", "cannot cast type holder2 to …"),
            // A word of PostgreSQL's messages in a type's place is kept only when its messages
            // print it there: a type named with one is not.
            ("cannot cast type holder2 to password", "cannot cast type holder2 to …"),
            ("argument of WHERE must be type boolean, not type password", "argument of WHERE must be type boolean, not type …"),
            ("UNION types text and password cannot be matched", "UNION types text and … cannot be matched"),
            ("column \"c\" is of type password but expression is of type integer",
             "column \"c\" is of type … but expression is of type integer"),
            ("cannot cast type ignore.all to integer", "cannot cast type ….… to integer"),
            ("cannot cast type \"Mal\".password to integer", "cannot cast type \"…\".… to integer"),
            ("cannot cast type password.\"Mal\" to integer", "cannot cast type ….\"…\" to integer"),
            ("cannot cast type \"Mal\" to password", "cannot cast type \"…\" to …"),
            ("cannot cast type text[] to password[]", "cannot cast type text[] to …[]"),
            ("cannot cast type character varying(10)[] to password", "cannot cast type character varying(…)[] to …"),
            ("cannot cast type \"Mal\"[] to password", "cannot cast type \"…\"[] to …"),
            ("UNION types integer[] and password cannot be matched", "UNION types integer[] and … cannot be matched"),
            ("COALESCE types character varying and password cannot be matched",
             "COALESCE types character varying and … cannot be matched"),
            ("UNION types timestamp without time zone and password cannot be matched",
             "UNION types timestamp without time zone and … cannot be matched"),
            ("Cannot cast type integer[] to password in column 1.", "Cannot cast type integer[] to … in column …."),
            // A function's argument types, and the types a detail sets against each other.
            ("function f(integer, password) is not unique", "function f(integer, …) is not unique"),
            ("function zz(integer) is not unique", "function …(integer) is not unique"),
            ("f(password, superuser) is a procedure", "f(…, …) is a procedure"),
            ("integer versus password", "integer versus …"),
            // A schema-qualified type whose name is quoted keeps its place.
            ("cannot cast type mal.\"X\" to password", "cannot cast type ….\"…\" to …"),
            ("Cannot cast type \"S\".\"X\" to superuser in column 2.", "Cannot cast type \"…\".\"…\" to … in column …."),
            // nl2sql's own wording.
            ("generated SQL contains a NUL byte", "generated SQL contains a NUL byte"),
        ]);
    }

    #[test]
    fn a_read_error_keeps_the_wording_its_messages_print_where_a_type_may_stand() {
        told_as("t2 holder2 c f CASE", &[
            ("cannot cast type integer to boolean", "cannot cast type integer to boolean"),
            ("CASE types integer and text cannot be matched", "CASE types integer and text cannot be matched"),
            ("could not determine data type of parameter $1", "could not determine data type of parameter $…"),
            ("column \"c\" is of type integer but expression is of type text", "column \"c\" is of type integer but expression is of type text"),
            ("argument of WHERE must be type boolean, not type timestamp without time zone",
             "argument of WHERE must be type boolean, not type timestamp without time zone"),
            ("invalid input syntax for type double precision", "invalid input syntax for type double precision"),
            ("You might need to add explicit type casts.", "You might need to add explicit type casts."),
            ("cannot cast type holder2 to type integer", "cannot cast type holder2 to type integer"),
            ("cannot cast type holder2 to type password", "cannot cast type holder2 to type …"),
            // A type named `type` takes its own place only.
            ("cannot cast type type to password", "cannot cast type type to …"),
            ("a column t2.f and its type.", "a column t2.f and its type."),
            // Other messages that end like a function's or set two parts against each other.
            ("column name \"f\" is not unique", "column name \"f\" is not unique"),
            ("column \"t2 versus f\" does not exist", "column \"…\" does not exist"),
        ]);
    }
}
