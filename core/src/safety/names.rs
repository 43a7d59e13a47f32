//! Whether a statement's text holds a relation's quoted name as a whole name: how the check of a
//! table owner's read by name (src/pg/relation.rs) tells the read's own statements from the
//! code the table's owner runs meanwhile.

/// A byte that may continue a name (quoted or not, qualified or not): `sales.items` holds
/// `s.items` only inside a longer name.
fn continues_name(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'"' | b'.') || b >= 0x80
}

/// Whether `text` holds `name` with no part of a longer name on either side.
pub fn holds_name(text: &[u8], name: &[u8]) -> bool {
    if name.is_empty() || name.len() > text.len() {
        return false;
    }
    (0..=text.len() - name.len()).any(|i| {
        text[i..].starts_with(name) && (i == 0 || !continues_name(text[i - 1])) && text.get(i + name.len()).is_none_or(|b| !continues_name(*b))
    })
}

#[cfg(test)]
mod tests {
    use super::holds_name;

    #[test]
    fn a_whole_name_is_held() {
        assert!(holds_name(b"SELECT v FROM public.towns t", b"public.towns"));
        assert!(holds_name(b"FROM (SELECT c AS v FROM \"My S\".\"T\") s", b"\"My S\".\"T\""));
        assert!(holds_name(b"public.towns", b"public.towns"));
        assert!(holds_name(b"x,public.towns)", b"public.towns"));
    }

    #[test]
    fn a_name_inside_a_longer_one_is_not() {
        assert!(!holds_name(b"SELECT * FROM sales.items", b"s.items"));
        assert!(!holds_name(b"SELECT * FROM s.items2", b"s.items"));
        assert!(!holds_name(b"SELECT * FROM x.s.items", b"s.items"));
        assert!(!holds_name(b"SELECT * FROM \"s.items\"", b"s.items"));
        assert!(!holds_name(b"SELECT * FROM caf\xc3\xa9s.items", b"s.items"));
        assert!(!holds_name(b"", b"s.items"));
        assert!(!holds_name(b"s.items", b""));
    }
}
