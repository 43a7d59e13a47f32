//! Alternatives for one column grouped before AND.

use crate::align::{align, Context, NoValues, Rules};
use crate::schema::tests::star_schema;

#[test]
fn function_groups_alternatives_for_one_column_before_and() {
    let s = star_schema();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules::ALL);
    let a = fix("SELECT name FROM singer WHERE country = 'France' OR country = 'Spain' AND age > 30");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE (country = 'France' OR country = 'Spain') AND age > 30");
    assert_eq!(a.fired, vec!["function: alternatives for country grouped before AND".to_string()]);
    // Three alternatives, qualified, LIKE and IN among them; the AND chain goes on.
    assert_eq!(
        fix("SELECT 1 FROM singer AS s WHERE s.country = 'France' OR s.country LIKE 'Sp%' OR s.country IN ('Italy') AND s.age > 30 AND s.name <> 'x'").sql,
        "SELECT 1 FROM singer AS s WHERE (s.country = 'France' OR s.country LIKE 'Sp%' OR s.country IN ('Italy')) AND s.age > 30 AND s.name <> 'x'"
    );
    // An expression of the column tested by each.
    assert_eq!(
        fix("SELECT count(*) FROM singer WHERE lower(name) LIKE 'j%' OR lower(name) LIKE '%ez' AND lower(country) LIKE '%a%'").sql,
        "SELECT count(*) FROM singer WHERE (lower(name) LIKE 'j%' OR lower(name) LIKE '%ez') AND lower(country) LIKE '%a%'"
    );
    // The other way round: the AND's last term and the alternatives after it.
    assert_eq!(
        fix("SELECT name FROM singer WHERE age > 30 AND country = 'France' OR country = 'Spain'").sql,
        "SELECT name FROM singer WHERE age > 30 AND (country = 'France' OR country = 'Spain')"
    );
    // In a join's condition and in a subquery too.
    assert_eq!(
        fix("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer WHERE age = 20 OR age = 30 AND country = 'Spain')").sql,
        "SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer WHERE (age = 20 OR age = 30) AND country = 'Spain')"
    );
    // A run of ORs read whole: three alternatives after the AND's last term; in HAVING and in
    // a CASE's condition.
    assert_eq!(
        fix("SELECT name FROM singer WHERE age > 1 AND country = 'a' OR country = 'b' OR country = 'c'").sql,
        "SELECT name FROM singer WHERE age > 1 AND (country = 'a' OR country = 'b' OR country = 'c')"
    );
    assert_eq!(
        fix("SELECT country FROM singer GROUP BY country HAVING country = 'a' OR country = 'b' AND count(*) > 1").sql,
        "SELECT country FROM singer GROUP BY country HAVING (country = 'a' OR country = 'b') AND count(*) > 1"
    );
    assert_eq!(
        fix("SELECT CASE WHEN age = 1 OR age = 2 AND name = 'x' THEN 1 END FROM singer").sql,
        "SELECT CASE WHEN (age = 1 OR age = 2) AND name = 'x' THEN 1 END FROM singer"
    );
    // Left alone: parentheses written; alternatives for different columns; the AND's term
    // testing another column; a comparison that is no test of one value; NOT IN; no AND.
    for sql in [
        "SELECT name FROM singer WHERE country = 'France' OR (country = 'Spain' AND age > 30)",
        "SELECT name FROM singer WHERE (country = 'France' OR country = 'Spain') AND age > 30",
        "SELECT name FROM singer WHERE name = 'A' OR country = 'Spain' AND age > 30",
        "SELECT name FROM singer WHERE country = 'France' OR age > 30 AND country = 'Spain'",
        "SELECT name FROM singer WHERE country = name OR country = 'Spain' AND age > 30",
        "SELECT name FROM singer WHERE country NOT IN ('France') OR country = 'Spain' AND age > 30",
        "SELECT name FROM singer WHERE country = 'France' OR country = 'Spain'",
        "SELECT name FROM singer WHERE age > 30 AND country = 'France' OR name = 'Spain'",
        "SELECT name FROM singer WHERE lower(name) LIKE 'j%' OR upper(name) LIKE 'J%' AND age > 30",
        "SELECT name FROM singer WHERE (SELECT 1) = 1 OR (SELECT 1) = 1 AND age > 30",
        // The AND chain between alternatives, or two of them: pairs meant as written.
        "SELECT name FROM singer WHERE age = 1 OR age = 2 AND name = 'x' OR age = 4",
        "SELECT name FROM singer WHERE age = 1 OR age = 2 AND name = 'x' OR age = 3 AND name = 'y'",
        // Expressions of one column that differ are two subjects.
        "SELECT 1 FROM singer WHERE substring(name, 1, 2) = 'ab' OR substring(name, 1, 3) = 'abc' AND age > 1",
    ] {
        let out = fix(sql);
        assert!(!out.fired.iter().any(|f| f.contains("grouped")), "{sql}: {:?}", out.fired);
        assert_eq!(out.sql.matches('(').count(), sql.matches('(').count(), "{sql}: {}", out.sql);
    }
    // Inside written parentheses, a group is read on its own.
    assert_eq!(
        fix("SELECT name FROM singer WHERE age > 3 AND (country = 'a' OR country = 'b' AND age < 9)").sql,
        "SELECT name FROM singer WHERE age > 3 AND ((country = 'a' OR country = 'b') AND age < 9)"
    );
    // A long run of ORs is looked at no further than its first terms (no deep recursion).
    let long = format!("SELECT name FROM singer WHERE {} AND age > 1", vec!["age = 1"; 5_000].join(" OR "));
    let _ = fix(&long);
}
