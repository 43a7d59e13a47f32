//! Unicode-escaped identifiers (`U&"line\000Abreak"`), read as PostgreSQL reads them.
//!
//! nl2sql shows a name holding a control, format or separator character in that form
//! (crate::render), so the model writes it so. sqlparser reads `U&'...'` strings but not such
//! identifiers: it takes `U&"x"` for a column `U` and an `&`, and fails where a relation is
//! expected (`FROM U&"line\000Abreak"`). [`reading`] gives the text with each one written as
//! the plain quoted identifier PostgreSQL reads it as, for sqlparser's reading only: what runs is
//! the model's own text, and PostgreSQL's parse tree still decides on it.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

/// Most escaped identifiers one text may hold; beyond that it is read as it is written.
const MAX_NAMES: usize = 256;

/// How sqlparser is to read a text.
#[derive(Debug, Default, PartialEq)]
pub struct Reading {
    /// The text with every `U&"..."` identifier written as a plain quoted identifier of the name
    /// it stands for; None where it holds none, or one this cannot read as PostgreSQL does (an
    /// escape that is not valid, `UESCAPE`, more than [`MAX_NAMES`]): then the text is read as it is.
    pub plain: Option<String>,
    /// The text writes a `U&"..."` identifier, read or not: sqlparser's printing of it would not
    /// be the name (the alignment rules leave such a text as it is).
    pub escaped: bool,
}

/// How sqlparser is to read `sql` ([`Reading`]); a text that does not tokenize is read as it is.
pub fn reading(sql: &str) -> Reading {
    if !sql.contains("&\"") {
        return Reading::default();
    }
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize_with_location() else { return Reading::default() };
    let escaped = (0..tokens.len().saturating_sub(2)).any(|i| {
        crate::interrupt::every(i, 4096);
        is_escaped(&tokens[i..i + 3]).is_some()
    });
    Reading { plain: escaped.then(|| plain_names(sql, &tokens)).flatten(), escaped }
}

/// `sql` (read as `tokens`) with every `U&"..."` identifier written plain; None where one cannot be.
fn plain_names(sql: &str, tokens: &[TokenWithSpan]) -> Option<String> {
    let offsets = Offsets::new(sql);
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut i = 0;
    while i + 2 < tokens.len() {
        crate::interrupt::every(i, 4096);
        if let Some(name) = is_escaped(&tokens[i..i + 3]) {
            if edits.len() == MAX_NAMES || uescape_follows(&tokens[i + 3..]) {
                return None;
            }
            let plain = decode(&name)?;
            let start = offsets.byte(tokens[i].span.start)?;
            let end = offsets.byte(tokens[i + 2].span.end)?;
            edits.push((start, end, format!("\"{}\"", plain.replace('"', "\"\""))));
            i += 3;
        } else {
            i += 1;
        }
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(sql.len());
    let mut at = 0;
    for (start, end, text) in edits {
        out.push_str(sql.get(at..start)?);
        out.push_str(&text);
        at = end;
    }
    out.push_str(sql.get(at..)?);
    Some(out)
}

/// The escaped body of `U&"..."` where the three tokens are `U` (or `u`), `&` and a quoted
/// identifier, each starting where the one before ends (PostgreSQL allows no space inside).
fn is_escaped(t: &[TokenWithSpan]) -> Option<String> {
    let [u, amp, quoted] = t else { return None };
    let is_u = matches!(&u.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("u"));
    let adjacent = u.span.end == amp.span.start && amp.span.end == quoted.span.start;
    match &quoted.token {
        Token::Word(w) if is_u && adjacent && matches!(amp.token, Token::Ampersand) && w.quote_style == Some('"') => Some(w.value.clone()),
        _ => None,
    }
}

/// Whether the next token that is not whitespace is `UESCAPE` (another escape character).
fn uescape_follows(rest: &[TokenWithSpan]) -> bool {
    rest.iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))
        .is_some_and(|t| matches!(&t.token, Token::Word(w) if w.value.eq_ignore_ascii_case("uescape")))
}

/// The name an escaped body stands for: `\XXXX` and `\+XXXXXX` (hexadecimal code points; a
/// high surrogate followed by a low one is one character), `\\` a backslash; None for any
/// other escape, a surrogate alone, or the zero code point.
fn decode(body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    let mut high: Option<u32> = None;
    while let Some(c) = chars.next() {
        if c != '\\' || chars.peek() == Some(&'\\') {
            if c == '\\' {
                chars.next();
            }
            high.is_none().then_some(())?;
            out.push(c);
            continue;
        }
        let digits = if chars.peek() == Some(&'+') {
            chars.next();
            6
        } else {
            4
        };
        let hex: String = chars.by_ref().take(digits).collect();
        if hex.len() != digits || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
            return None;
        }
        let code = u32::from_str_radix(&hex, 16).ok().filter(|&c| c != 0)?;
        match (high.take(), code) {
            (None, 0xD800..=0xDBFF) => high = Some(code),
            (Some(h), 0xDC00..=0xDFFF) => out.push(char::from_u32(0x10000 + ((h - 0xD800) << 10) + (code - 0xDC00))?),
            (None, _) => out.push(char::from_u32(code)?),
            (Some(_), _) => return None,
        }
    }
    high.is_none().then_some(out)
}

/// Byte offsets of the tokenizer's locations (1-based lines, counted at `\n`, and columns in
/// characters).
struct Offsets<'a> {
    sql: &'a str,
    lines: Vec<usize>,
}

impl<'a> Offsets<'a> {
    fn new(sql: &'a str) -> Offsets<'a> {
        let mut lines = vec![0];
        lines.extend(sql.char_indices().filter(|(_, c)| *c == '\n').map(|(i, _)| i + 1));
        Offsets { sql, lines }
    }

    fn byte(&self, at: Location) -> Option<usize> {
        let line_start = *self.lines.get(usize::try_from(at.line).ok()?.checked_sub(1)?)?;
        let column = usize::try_from(at.column).ok()?.checked_sub(1)?;
        let line = self.sql.get(line_start..)?;
        match line.char_indices().nth(column) {
            Some((i, _)) => Some(line_start + i),
            None if line.chars().count() == column => Some(self.sql.len()),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(sql: &str) -> Option<String> {
        reading(sql).plain
    }

    #[test]
    fn escaped_identifiers_become_the_names_postgresql_reads() {
        assert_eq!(plain(r#"SELECT n."c\d" FROM U&"line\000Abreak" AS n"#).as_deref(), Some("SELECT n.\"c\\d\" FROM \"line\nbreak\" AS n"));
        assert_eq!(plain(r#"SELECT u&"\FEFFid", U&"\+01F600" FROM t"#).as_deref(), Some("SELECT \"\u{feff}id\", \"\u{1F600}\" FROM t"));
        // A doubled quote and a backslash stay what they are; several lines are counted.
        assert_eq!(plain("SELECT 1\nFROM U&\"a\"\"b\\\\c\\0009\" x").as_deref(), Some("SELECT 1\nFROM \"a\"\"b\\c\t\" x"));
        // Non-ASCII text before the name moves its byte offsets, not its columns.
        assert_eq!(plain("SELECT 'é∑' FROM U&\"\\0041\"").as_deref(), Some("SELECT 'é∑' FROM \"A\""));
    }

    #[test]
    fn what_is_not_an_escaped_identifier_is_left_as_written() {
        for sql in [
            "SELECT 1",
            r#"SELECT U & "x" FROM t"#,
            r#"SELECT "U&""x""" FROM t"#,
            r#"SELECT 'U&"x"' FROM t"#,
            r#"SELECT U&'\0041' FROM t"#,
            r#"SELECT fu&"x" FROM t"#,
        ] {
            assert_eq!(plain(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_name_it_cannot_read_as_postgresql_does_leaves_the_text_as_written() {
        for sql in [
            r#"SELECT U&"!0070g_sleep" UESCAPE '!' (1)"#,
            r#"SELECT U&"\zz" FROM t"#,
            r#"SELECT U&"\00" FROM t"#,
            r#"SELECT U&"\D800" FROM t"#,
            r#"SELECT U&"\D83Dx" FROM t"#,
            r#"SELECT U&"\DE00\D83D" FROM t"#,
            r#"SELECT U&"\0000" FROM t"#,
            r#"SELECT U&"\+11FFFF" FROM t"#,
            r#"SELECT U&"unterminated"#,
        ] {
            assert_eq!(plain(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_surrogate_pair_is_one_character_and_every_escaped_name_is_told() {
        assert_eq!(plain(r#"SELECT U&"\D83D\DE00" FROM t"#).as_deref(), Some("SELECT \"\u{1F600}\" FROM t"));
        // Read or not, a text writing one is escaped; one that does not is not.
        assert_eq!(reading(r#"SELECT U&"!0041" UESCAPE '!' FROM t"#), Reading { plain: None, escaped: true });
        assert!(reading(r#"SELECT U&"\0041" FROM t"#).escaped);
        assert_eq!(reading(r#"SELECT 'U&"x"' FROM t"#), Reading::default());
    }

    #[test]
    fn a_function_name_is_read_as_the_function_it_calls() {
        assert_eq!(plain(r#"SELECT U&"\0070g_advisory_lock"(4242)"#).as_deref(), Some(r#"SELECT "pg_advisory_lock"(4242)"#));
    }
}
