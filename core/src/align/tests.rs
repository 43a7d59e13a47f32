use super::names::on_search_path;
use super::*;
use crate::schema::tests::{star_schema, two_schemas};

/// A value index over one column: singer.country holds 'France' and 'United States'.
struct Index;
impl ValueLookup for Index {
    fn closest_value(&mut self, table: u32, column: &str, literal: &str) -> Option<String> {
        let stored = ["France", "United States"];
        if table != 2 || column != "country" || stored.contains(&literal) {
            return None;
        }
        stored.iter().find(|s| s.eq_ignore_ascii_case(literal)).map(|s| s.to_string())
    }
}

/// A value index that finds nothing: only the statistics speak.
use super::NoValues as Nothing;

#[test]
fn tables_off_the_search_path_get_their_schema() {
    // Two schemas, each with a singer; the first also has singer_in_concert and concert.
    let mut s = two_schemas();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    // Ambiguous: the schema of the statement's other tables decides.
    let a = fix("SELECT count(*) FROM singer AS s JOIN music.singer_in_concert AS c ON c.singer_id = s.singer_id");
    assert_eq!(a.sql, "SELECT count(*) FROM music.singer AS s JOIN music.singer_in_concert AS c ON c.singer_id = s.singer_id");
    assert!(a.fired.contains(&"agent: table singer -> music.singer".to_string()), "{:?}", a.fired);
    // The other table only one schema holds decides, written before or after it.
    let b = fix("SELECT count(*) FROM singer AS s JOIN singer_in_concert AS c ON c.singer_id = s.singer_id");
    assert_eq!(b.sql, "SELECT count(*) FROM music.singer AS s JOIN music.singer_in_concert AS c ON c.singer_id = s.singer_id");
    // One table of that name: qualified.
    assert_eq!(fix("SELECT count(*) FROM stadium").sql, "SELECT count(*) FROM music.stadium");
    // Ambiguous with nothing to decide by: left as written (PostgreSQL says what is wrong).
    assert_eq!(fix("SELECT count(*) FROM singer").sql, "SELECT count(*) FROM singer");
    // ... unless the prompts showed only one of them; the statement's own schema goes first.
    let shown = vec!["pop.singer".to_string()];
    let by_shown = |sql: &str| align(sql, &s, Context { select: &[], linked: &[], shown: &shown, question: "" }, &mut Index, Rules::ALL);
    assert_eq!(by_shown("SELECT count(*) FROM singer").sql, "SELECT count(*) FROM pop.singer");
    assert_eq!(by_shown("SELECT count(*) FROM singers").sql, "SELECT count(*) FROM pop.singer");
    assert_eq!(
        by_shown("SELECT count(*) FROM singer AS s JOIN singer_in_concert AS c ON c.singer_id = s.singer_id").sql,
        "SELECT count(*) FROM music.singer AS s JOIN music.singer_in_concert AS c ON c.singer_id = s.singer_id"
    );
    // Both shown, or only ranked by retrieval (which reads what each owner wrote): neither,
    // whichever ranks first; a name no table has, closest to both, alike.
    for (first, second) in [("pop.singer", "music.singer"), ("music.singer", "pop.singer")] {
        let both = vec![first.to_string(), second.to_string()];
        let one = vec![first.to_string()];
        for cx in [
            Context { select: &[], linked: &both, shown: &[], question: "" },
            Context { select: &[], linked: &one, shown: &[], question: "" },
            Context { select: &[], linked: &both, shown: &both, question: "" },
        ] {
            let a = align("SELECT count(*) FROM singer", &s, cx, &mut Index, Rules::ALL);
            assert_eq!(a.sql, "SELECT count(*) FROM singer", "{:?}", a.fired);
            let b = align("SELECT count(*) FROM singers", &s, cx, &mut Index, Rules::ALL);
            assert_eq!(b.sql, "SELECT count(*) FROM singers", "{:?}", b.fired);
        }
    }
    // On the search path: nothing to do.
    assert!(fix("SELECT count(*) FROM music.singer").fired.is_empty());
    // One of that name on the search path is what PostgreSQL reads, whichever is listed first.
    let mut visible = s.tables[s.tables.len() - 1].clone();
    visible.oid = 10;
    visible.schema = "public".into();
    visible.ident = "singer".into();
    s.tables.push(visible);
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    assert!(fix("SELECT count(*) FROM singer AS s JOIN music.singer_in_concert AS c ON c.singer_id = s.singer_id").fired.is_empty());
    assert!(on_search_path("\"a.b\"") && !on_search_path("x.\"a\"") && on_search_path("singer"));
}

#[test]
fn a_bare_name_is_never_read_as_an_untrusted_owners_table_off_the_path() {
    // public.customers (the database's owner) and mallory.customer and mallory.ledger, which
    // mallory owns and granted to everyone: a `customer` the model wrote is the close name on
    // the path; `ledger` is no table any rule reads.
    let t = crate::schema::tests::table_json;
    let mut planted = t(2, "customer", &["id", "name"], &["id"]);
    planted["schema"] = "mallory".into();
    planted["ident"] = "mallory.customer".into();
    let mut ledger = t(3, "ledger", &["id", "amount"], &["id"]);
    ledger["schema"] = "mallory".into();
    ledger["ident"] = "mallory.ledger".into();
    let mut customers = t(1, "customers", &["id", "name"], &["id"]);
    customers["owner_trusted"] = true.into();
    let schema = |planted: &serde_json::Value, ledger: &serde_json::Value| -> Schema {
        serde_json::from_value(serde_json::json!({"tables": [customers, planted, ledger], "foreign_keys": []})).unwrap()
    };
    let fix = |s: &Schema, sql: &str| align(sql, s, Context::default(), &mut Nothing, Rules::ALL);
    let s = schema(&planted, &ledger);
    let a = fix(&s, "SELECT count(*) FROM customer");
    assert_eq!(a.sql, "SELECT count(*) FROM customers", "{:?}", a.fired);
    // misspelt as well: the same
    assert_eq!(fix(&s, "SELECT count(*) FROM customerz").sql, "SELECT count(*) FROM customers");
    // no name on the path close to it: left as written (PostgreSQL says it does not exist)
    assert_eq!(fix(&s, "SELECT sum(amount) FROM ledger").sql, "SELECT sum(amount) FROM ledger");
    assert_eq!(find_table(&s, &table_name("ledger")), None);
    assert_eq!(find_table(&s, &table_name("mallory.ledger")), Some(2));
    // her schema's name written as a table: none of her tables
    assert_eq!(fix(&s, "SELECT sum(amount) FROM mallory").sql, "SELECT sum(amount) FROM mallory");
    // written with her schema: hers, as written (the model chose it; the policy judges it)
    assert!(fix(&s, "SELECT count(*) FROM mallory.customer").fired.is_empty());
    // Negative: the same tables with an owner the caller trusts are read as before.
    let (mut trusted, mut trusted_ledger) = (planted.clone(), ledger.clone());
    trusted["owner_trusted"] = true.into();
    trusted_ledger["owner_trusted"] = true.into();
    let s = schema(&trusted, &trusted_ledger);
    assert_eq!(fix(&s, "SELECT count(*) FROM customer").sql, "SELECT count(*) FROM mallory.customer");
    assert_eq!(fix(&s, "SELECT sum(amount) FROM ledger").sql, "SELECT sum(amount) FROM mallory.ledger");
    assert_eq!(fix(&s, "SELECT sum(amount) FROM mallory").sql, "SELECT sum(amount) FROM mallory.ledger");
    assert_eq!(find_table(&s, &table_name("ledger")), Some(2));
}

/// `n` parsed as a FROM item's name.
fn table_name(n: &str) -> ObjectName {
    match Parser::parse_sql(&PostgreSqlDialect {}, &format!("SELECT 1 FROM {n}")).as_deref() {
        Ok([Statement::Query(q)]) => match q.body.as_ref() {
            SetExpr::Select(s) => match &s.from[0].relation {
                TableFactor::Table { name, .. } => name.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bare_table_name_reads_the_one_on_the_search_path() {
    let name = table_name;
    // music.singer, pop.singer and no singer on the search path: the first of that name.
    let mut s = two_schemas();
    let music = s.tables.iter().position(|t| t.ident == "music.singer");
    assert_eq!(find_table(&s, &name("singer")), music);
    assert_eq!(find_table(&s, &name("pop.singer")), s.tables.iter().position(|t| t.ident == "pop.singer"));
    // A singer on the search path, listed last, with other columns: PostgreSQL reads it.
    let mut visible = s.tables[1].clone();
    visible.oid = 10;
    visible.schema = "public".into();
    visible.ident = "singer".into();
    visible.columns.retain(|c| c.name != "country");
    s.tables.push(visible);
    let public = Some(s.tables.len() - 1);
    assert_eq!(find_table(&s, &name("singer")), public);
    assert_eq!(find_table(&s, &name("SINGER")), public);
    assert_eq!(find_table(&s, &name("music.singer")), music);
    assert_eq!(find_table(&s, &name("public.singer")), public);
}

#[test]
fn a_misspelt_table_is_the_closest_of_the_schema_written_or_on_the_search_path() {
    let mut s = two_schemas();
    let fix = |s: &Schema, sql: &str| align(sql, s, Context::default(), &mut Nothing, Rules::ALL).sql;
    // The schema written holds it; the catalog's first (music) does not decide.
    assert_eq!(fix(&s, "SELECT name FROM pop.singers"), "SELECT name FROM pop.singer");
    assert_eq!(fix(&s, "SELECT name FROM music.singers"), "SELECT name FROM music.singer");
    // Bare, two schemas off the search path hold it, nothing decides: as written.
    assert_eq!(fix(&s, "SELECT name FROM singers"), "SELECT name FROM singers");
    // ... the statement's other tables decide; one only one schema holds is found.
    assert_eq!(fix(&s, "SELECT count(*) FROM stadiums"), "SELECT count(*) FROM music.stadium");
    // One on the search path: that one, wherever the catalog lists it.
    let mut visible = s.tables[1].clone();
    visible.oid = 10;
    visible.schema = "public".into();
    visible.ident = "singer".into();
    s.tables.push(visible);
    assert_eq!(fix(&s, "SELECT name FROM singers"), "SELECT name FROM singer");
}

#[test]
fn schema_names_written_as_tables() {
    let s = two_schemas();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    // The one table of the schema with every column the SELECT takes from it.
    let a = fix("SELECT name, capacity FROM music WHERE capacity > 100");
    assert_eq!(a.sql, "SELECT name, capacity FROM music.stadium WHERE capacity > 100");
    assert!(a.fired[0].starts_with("agent: table music -> music.stadium"), "{:?}", a.fired);
    assert_eq!(fix("SELECT m.concert_name FROM music AS m").sql, "SELECT m.concert_name FROM music.concert AS m");
    // Each SELECT by its own columns.
    assert_eq!(
        fix("SELECT name FROM music WHERE singer_id NOT IN (SELECT singer_id FROM music WHERE concert_id = 1)").sql,
        "SELECT name FROM music.singer WHERE singer_id NOT IN (SELECT singer_id FROM music.singer_in_concert WHERE concert_id = 1)"
    );
    // Several tables hold them: the linked one, else left as written; no column: left alone.
    assert_eq!(fix("SELECT name FROM music").sql, "SELECT name FROM music");
    let linked = vec!["music.singer".to_string()];
    assert_eq!(
        align("SELECT name FROM music", &s, Context { select: &[], linked: &linked, shown: &[], question: "" }, &mut Index, Rules::ALL).sql,
        "SELECT name FROM music.singer"
    );
    assert!(fix("SELECT count(*) FROM music").fired.is_empty());
    // A name that is a table is never read as a schema.
    assert!(fix("SELECT name FROM music.singer").fired.is_empty());
}

#[test]
fn columns_written_with_the_wrong_table() {
    // year is concert's: T2 is stadium, T1 concert.
    let a = run("SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id WHERE T2.year = 2014");
    assert_eq!(a.sql, "SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id WHERE t1.year = 2014");
    assert_eq!(a.fired, vec!["agent: column t2.year -> t1.year".to_string()]);
    // Without an alias, by the table's name.
    assert_eq!(
        run("SELECT stadium.year FROM concert JOIN stadium ON concert.stadium_id = stadium.stadium_id").sql,
        "SELECT concert.year FROM concert JOIN stadium ON concert.stadium_id = stadium.stadium_id"
    );
    // Two other tables have it: left for PostgreSQL to reject.
    let sql = "SELECT sic.name, g.age FROM singer_in_concert AS sic JOIN singer AS g ON g.singer_id = sic.singer_id JOIN concert AS c ON c.concert_id = sic.concert_id JOIN stadium AS st ON st.stadium_id = c.stadium_id";
    assert!(run(sql).fired.is_empty(), "{:?}", run(sql).fired);
    // A self-join: which alias is meant is not known.
    let sql = "SELECT a.capacity FROM concert AS c JOIN stadium AS a ON a.stadium_id = c.stadium_id JOIN stadium AS b ON b.stadium_id = c.stadium_id WHERE c.capacity > 1";
    assert!(run(sql).fired.is_empty(), "{:?}", run(sql).fired);
}

#[test]
fn columns_qualified_with_a_name_the_statement_never_declares() {
    // employee is not in FROM; the one relation in scope with the column holds it.
    let a = run("SELECT concert.concert_name, COUNT(singer.singer_id) FROM concert JOIN singer_in_concert AS sic ON concert.concert_id = sic.concert_id GROUP BY concert.concert_name");
    assert_eq!(a.sql, "SELECT concert.concert_name, COUNT(sic.singer_id) FROM concert JOIN singer_in_concert AS sic ON concert.concert_id = sic.concert_id GROUP BY concert.concert_name");
    assert_eq!(a.fired, vec!["agent: column singer.singer_id -> sic.singer_id (singer is not in FROM)".to_string()]);
    // An alias never declared, by the table's name where it has no alias.
    assert_eq!(
        run("SELECT T3.name FROM singer JOIN singer_in_concert AS T2 ON singer.singer_id = T2.singer_id").sql,
        "SELECT singer.name FROM singer JOIN singer_in_concert AS T2 ON singer.singer_id = T2.singer_id"
    );
    // Two relations have it, or none: left for PostgreSQL to reject.
    for sql in [
        "SELECT T3.concert_id FROM concert AS T1 JOIN singer_in_concert AS T2 ON T1.concert_id = T2.concert_id",
        "SELECT T3.capacity FROM concert AS T1 JOIN singer_in_concert AS T2 ON T1.concert_id = T2.concert_id",
        // A self-join: which alias is meant is not known.
        "SELECT T3.name FROM singer AS a JOIN singer AS b ON a.age = b.age",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql).fired);
    }
    // Compared with another column: `T2.stadium_id = T2.stadium_id` would join nothing.
    let sql = "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T3.stadium_id = T2.stadium_id";
    assert!(run(sql).fired.is_empty(), "{:?}", run(sql).fired);
    let sql = "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T2.year = T3.age";
    assert!(run(sql).fired.is_empty(), "{:?}", run(sql).fired);
    // Declared names are never rewritten: a derived table, a CTE, a function's alias, a
    // relation the schema does not show.
    for sql in [
        "SELECT d.country FROM (SELECT name FROM singer) AS d JOIN singer ON singer.name = d.name",
        "WITH d AS (SELECT name FROM singer) SELECT d.country FROM d, singer",
        "SELECT g.age FROM singer, generate_series(1, 3) AS g",
        "SELECT other_table.age FROM other_table, singer",
        "SELECT o.age FROM other_schema.other_table AS o, singer",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql).fired);
    }
}

#[test]
fn a_column_is_fixed_with_the_tables_its_select_may_read() {
    // In a subquery, its own table's column; in a correlated subquery, the enclosing one's.
    let a = run("SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE yeer = 2014)");
    assert_eq!(a.sql, "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE year = 2014)");
    let a = run("SELECT name FROM stadium AS s WHERE EXISTS (SELECT 1 FROM concert AS c WHERE c.stadium_id = s.stadium_id AND capacty > 100)");
    assert_eq!(a.fired, vec!["agent: column capacty -> capacity".to_string()]);
    // Never a column only a subquery's table has: the outer query cannot read it.
    for sql in [
        "SELECT concert_nme FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert)",
        "SELECT T2.year FROM stadium AS T2 WHERE T2.stadium_id IN (SELECT stadium_id FROM concert AS T1)",
        "SELECT x.year FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert AS T1)",
        // A CTE cannot read the main query's tables, nor the main query a CTE's.
        "WITH c AS (SELECT concert_id FROM concert WHERE capacty > 1) SELECT c.concert_id FROM c JOIN stadium ON capacity > 1",
        "WITH c AS (SELECT concert_id FROM concert) SELECT concert_nme FROM c JOIN stadium ON capacity > 1",
        // Nor a sibling subquery's.
        "SELECT (SELECT max(year) FROM concert), (SELECT count(*) FROM singer WHERE yeer > 1) FROM stadium",
    ] {
        let a = run(sql);
        assert!(!a.fired.iter().any(|f| f.contains("yeer -> ") || f.contains("concert_nme -> ") || f.contains(".year -> ") || f.contains("capacty -> ")), "{sql}: {:?}", a.fired);
    }
    // A query's ORDER BY reads its own tables.
    let a = run("SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert ORDER BY yeer LIMIT 3) ORDER BY capacty");
    assert_eq!(a.sql, "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert ORDER BY year LIMIT 3) ORDER BY capacity");
}

#[test]
fn an_alias_reused_in_a_subquery_names_its_own_levels_table() {
    for sql in [
        "SELECT T1.name FROM singer AS T1 WHERE T1.singer_id IN (SELECT T1.singer_id FROM singer_in_concert AS T1 JOIN concert AS T2 ON T1.concert_id = T2.concert_id WHERE T2.year = 2014)",
        "SELECT T1.name, (SELECT count(*) FROM singer_in_concert AS T1 WHERE T1.concert_id > 0) FROM singer AS T1",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql));
    }
    // A typo is fixed with the table its own level's alias names.
    let a = run("SELECT T1.name FROM singer AS T1 WHERE T1.singer_id IN (SELECT T1.singer_idd FROM singer_in_concert AS T1)");
    assert_eq!(a.sql, "SELECT T1.name FROM singer AS T1 WHERE T1.singer_id IN (SELECT T1.singer_id FROM singer_in_concert AS T1)");
}

#[test]
fn columns_of_a_cte_or_derived_table_are_left_as_written() {
    for sql in [
        "WITH n AS (SELECT name FROM singer UNION SELECT name FROM stadium) SELECT concert_name FROM concert WHERE concert_name IN (SELECT name FROM n)",
        "SELECT name FROM concert JOIN (SELECT stadium_id, name FROM stadium) AS d USING (stadium_id) WHERE concert_id IN (SELECT concert_id FROM singer_in_concert JOIN singer USING (singer_id))",
        // A CTE named as a table is the CTE.
        "WITH singer AS (SELECT singer_id, concert_id FROM singer_in_concert) SELECT DISTINCT singer.concert_id FROM singer, concert WHERE concert.year = 2014",
        "WITH \"Élèves\" AS (SELECT name FROM stadium) SELECT Élèves.name FROM \"Élèves\", singer",
        // A join with an alias hides its tables' names.
        "SELECT x.name FROM (singer JOIN singer_in_concert AS sic USING (singer_id)) AS j",
        "SELECT s.name FROM singer, (SELECT x.age FROM concert) AS s",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql));
    }
}

#[test]
fn an_undeclared_qualifier_never_becomes_a_self_comparison_or_an_outer_reference() {
    for sql in [
        "SELECT DISTINCT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE T1.age > T3.age",
        "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE T1.name <> T3.name",
        "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T2.stadium_id IS NOT DISTINCT FROM T3.stadium_id",
        "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T2.stadium_id IN (T3.stadium_id)",
        "SELECT T1.name FROM singer AS T1 WHERE T1.age - T3.age > 0",
        "SELECT T1.age - T3.age FROM singer AS T1",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql));
    }
    // The same table at two levels: the subquery's own.
    let a = run("SELECT s1.name FROM singer AS s1 WHERE s1.age > ALL (SELECT x.age FROM singer WHERE singer.country = 'France')");
    assert_eq!(a.sql, "SELECT s1.name FROM singer AS s1 WHERE s1.age > ALL(SELECT singer.age FROM singer WHERE singer.country = 'France')");
    // A table's name hidden by its alias is the alias.
    let a = run("SELECT singer.name FROM singer AS s JOIN singer_in_concert AS sic ON s.singer_id = sic.singer_id");
    assert_eq!(a.sql, "SELECT s.name FROM singer AS s JOIN singer_in_concert AS sic ON s.singer_id = sic.singer_id");
}

#[test]
fn columns_combined_or_in_separate_conditions_are_fixed() {
    for (sql, want, note) in [
        // Two columns of other names combined: each takes the one table holding it.
        ("SELECT T2.capacity - T2.stadium_id FROM stadium AS T1", "SELECT t1.capacity - t1.stadium_id FROM stadium AS T1", "agent: column t2.capacity -> t1.capacity (t2 is not in FROM)"),
        // Conditions joined by AND are not a comparison of their columns.
        (
            "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE T3.country = 'France' AND T1.age > 30",
            "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE t1.country = 'France' AND T1.age > 30",
            "agent: column t3.country -> t1.country (t3 is not in FROM)",
        ),
        (
            "SELECT c.concert_name FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id WHERE c.capacity > 100 OR s.name = 'x'",
            "SELECT c.concert_name FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id WHERE s.capacity > 100 OR s.name = 'x'",
            "agent: column c.capacity -> s.capacity",
        ),
    ] {
        let a = run(sql);
        assert_eq!(a.sql, want, "{sql}: {:?}", a.fired);
        assert!(a.fired.iter().any(|f| f.as_str() == note), "{sql}: {:?}", a.fired);
    }
    // A join condition never becomes a condition on one table.
    for sql in [
        "SELECT c.concert_name FROM concert AS c JOIN stadium AS s ON s.year = c.stadium_id",
        "SELECT c.concert_name FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.year",
    ] {
        let a = run(sql);
        assert!(a.fired.iter().all(|f| !f.starts_with("agent: column")), "{sql}: {:?}", a.fired);
    }
}

#[test]
fn one_reference_combined_with_itself_is_fixed_alike_everywhere() {
    // capacity is stadium's: c.capacity, written twice in one combination, becomes s.capacity
    // in both places.
    let join = "FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id";
    for (sql, want) in [
        (format!("SELECT c.capacity - lag(c.capacity) OVER (ORDER BY c.year) {join}"), "SELECT s.capacity - lag(s.capacity) OVER (ORDER BY c.year)"),
        (format!("SELECT c.capacity * 100.0 / sum(c.capacity) OVER () {join}"), "SELECT s.capacity * 100.0 / sum(s.capacity) OVER ()"),
        (format!("SELECT max(c.capacity) - min(c.capacity) {join}"), "SELECT max(s.capacity) - min(s.capacity)"),
    ] {
        let a = run(&sql);
        assert!(a.sql.starts_with(want), "{sql}: {:?}", a);
        assert_eq!(a.fired, vec!["agent: column c.capacity -> s.capacity".to_string(); 2], "{sql}");
    }
    // Written with two qualifiers, the wrong one is not made the other: `s.capacity -
    // s.capacity` would be a column combined with itself.
    for sql in [
        format!("SELECT c.capacity - s.capacity {join}"),
        format!("SELECT coalesce(c.capacity, s.capacity) {join}"),
        format!("SELECT c.capacity - lag(s.capacity) OVER (ORDER BY c.year) {join}"),
    ] {
        let a = run(&sql);
        assert!(a.fired.iter().all(|f| !f.starts_with("agent: column")), "{sql}: {:?}", a);
    }
}

#[test]
fn a_comparison_in_any_form_is_never_made_one_of_a_column_with_itself() {
    let join = "SELECT c.concert_name FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id";
    let t1 = "FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id";
    for (sql, never) in [
        (format!("{join} WHERE s.name LIKE c.name AND c.year = 2014"), "s.name LIKE s.name"),
        (format!("{join} WHERE s.name ILIKE '%' || c.name || '%'"), "'%' || s.name"),
        (format!("{join} WHERE s.name SIMILAR TO c.name OR c.year = 2014"), "SIMILAR TO s.name"),
        (format!("{join} WHERE s.name ~ c.name"), "~ s.name"),
        (format!("{join} WHERE position(c.name IN s.name) > 0"), "position(s.name IN s.name)"),
        (format!("{join} WHERE s.name = ANY(ARRAY[c.name])"), "ARRAY[s.name]"),
        (format!("SELECT T1.name {t1} WHERE T1.name LIKE T3.name AND T1.age > 30"), "LIKE t1.name"),
        (format!("SELECT greatest(T1.age, T3.age) {t1}"), "T1.age, t1.age"),
        (format!("SELECT coalesce(T1.age, T3.age) {t1}"), "T1.age, t1.age"),
        (format!("SELECT CASE T1.age WHEN T3.age THEN 1 END {t1}"), "WHEN t1.age"),
        (format!("SELECT T1.name {t1} WHERE strpos(T1.name, T3.name) > 0"), "T1.name, t1.name"),
        // compared with what a subquery selects, which may read the outer table (correlated)
        (format!("SELECT T1.name {t1} WHERE T3.age IN (SELECT T1.age FROM stadium)"), "t1.age IN (SELECT T1.age"),
        (format!("SELECT T1.name {t1} WHERE T3.age > (SELECT max(T1.age) FROM stadium)"), "t1.age > (SELECT max(T1.age)"),
        (format!("SELECT T1.name {t1} WHERE T3.age = ANY (SELECT T1.age FROM stadium)"), "t1.age = ANY (SELECT T1.age"),
    ] {
        let a = run(&sql);
        assert!(!a.sql.contains(never), "{sql}: {:?}", a);
    }
    // A composite column's field is not a column qualified with an undeclared name.
    let a = run("SELECT c.info.capacity FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id");
    assert!(a.fired.is_empty(), "{:?}", a);
}

#[test]
fn names_fold_as_postgresql_folds_them() {
    // PostgreSQL lowercases only the ASCII letters of an unquoted name: Élèves is the table
    // "Élèves" (its column's typo is fixed with it), élèves is another name, which PostgreSQL
    // refuses: the table fix writes the table's own.
    let mut s = star_schema();
    s.tables[3].name = "Élèves".into();
    s.tables[3].ident = "\"Élèves\"".into();
    let run = |sql: &str| align(sql, &s, Context::default(), &mut Nothing, Rules::ALL);
    assert_eq!(run("SELECT Élèves.capacty FROM Élèves").sql, "SELECT Élèves.capacity FROM Élèves");
    assert_eq!(run("SELECT \"Élèves\".capacty FROM \"Élèves\"").sql, "SELECT \"Élèves\".capacity FROM \"Élèves\"");
    for sql in ["SELECT élèves.capacty FROM élèves", "SELECT \"élèves\".capacty FROM \"élèves\""] {
        assert!(run(sql).fired.iter().any(|f| f.ends_with("-> \"Élèves\"")), "{sql}: {:?}", run(sql).fired);
    }
}

#[test]
fn a_rewrite_writes_only_names_visible_there() {
    for (sql, want) in [
        ("SELECT x.name FROM singer WHERE singer_id IN (SELECT s.singer_id FROM singer AS s)", "SELECT singer.name FROM singer"),
        (
            "SELECT x.capacity FROM stadium AS s JOIN concert AS c ON s.stadium_id = c.stadium_id WHERE c.year = (SELECT max(year) FROM concert AS s)",
            "SELECT s.capacity FROM stadium AS s",
        ),
    ] {
        let a = run(sql);
        assert!(a.sql.starts_with(want), "{sql}: {:?}", a);
    }
}

#[test]
fn names_postgresql_accepts_are_never_rewritten() {
    for sql in [
        // Columns renamed by an alias's column list.
        "SELECT s.id FROM singer AS s(id)",
        "SELECT id FROM singer AS s(id)",
        // A whole row.
        "SELECT to_json(stadium) FROM stadium",
        // A parenthesised query's ORDER BY reads its own FROM.
        "SELECT s.name, ARRAY((SELECT sic.concert_id FROM singer_in_concert AS sic) ORDER BY sic.singer_id DESC) FROM singer AS s",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql));
    }
    // Undeclared qualifiers paired with another column inside an expression, or in a subquery
    // whose own tables lack the column (the enclosing one's would make it correlated).
    for sql in [
        "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE T1.age > T3.age + 1",
        "SELECT T1.name FROM singer AS T1 WHERE lower(T1.name) <> lower(T3.name)",
        "SELECT s1.name FROM singer AS s1 WHERE EXISTS (SELECT 1 FROM singer_in_concert AS sic WHERE x.age > 30)",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql));
    }
    // Written with the subquery's table: joined there (another rule), never the outer s1's.
    let a = run("SELECT s1.name FROM singer AS s1 WHERE EXISTS (SELECT 1 FROM singer_in_concert AS sic WHERE sic.age > 30)");
    assert!(!a.sql.contains("s1.age"), "{a:?}");
}

#[test]
fn names_postgresql_reads_as_functions_are_quoted() {
    // A column named current_user, written unquoted, would be the role's name.
    let mut s = star_schema();
    s.tables[1].columns[2].name = "current_user".into();
    let a = align("SELECT current_usr FROM singer", &s, Context::default(), &mut Index, Rules::ALL);
    assert_eq!(a.sql, "SELECT \"current_user\" FROM singer");
    assert_eq!(ident("name").to_string(), "name");
    // A reserved key word names a table or begins a reference only quoted; a word that merely
    // starts like one does not need it.
    assert_eq!(ident("order").to_string(), "\"order\"");
    assert_eq!(ident("user").to_string(), "\"user\"");
    assert_eq!(ident("orders").to_string(), "orders");
}

#[test]
fn a_name_sqlparser_prints_as_another_is_never_written() {
    // sqlparser's printer leaves a doubled quote and a quote after a backslash as they are: a
    // statement holding such a name does not read back as itself, and no rule applies to it.
    // The model wrote the name as PostgreSQL quotes it, and another rule fired (singers).
    for name in ["x\"\"y", "\"\""] {
        let mut s = star_schema();
        s.tables[1].columns[2].name = name.to_string();
        s.tables[1].columns[2].ident = format!("\"{}\"", name.replace('"', "\"\""));
        let sql = format!("SELECT {} FROM singers", s.tables[1].columns[2].ident);
        let a = align(&sql, &s, Context::default(), &mut Index, Rules::ALL);
        assert!(a.fired.is_empty() && a.sql == sql, "{name:?}: {:?} {}", a.fired, a.sql);
        // Without it, the same rule applies.
        let a = align("SELECT name FROM singers", &s, Context::default(), &mut Index, Rules::ALL);
        assert_eq!(a.sql, "SELECT name FROM singer");
    }
    // One quote, a backslash elsewhere, a line break: printed as PostgreSQL quotes them.
    for name in ["Name", "a\"b", "x\\", "a\nb", "é\"ü"] {
        let expected = format!("\"{}\"", name.replace('"', "\"\""));
        assert_eq!(ident(name).to_string(), expected, "{name:?}");
    }
}

#[test]
fn columns_named_by_a_part_of_their_name() {
    // concert's name is concert_name; an id could be concert_id or stadium_id.
    let a = run("SELECT name FROM concert");
    assert_eq!(a.sql, "SELECT concert_name FROM concert");
    assert!(run("SELECT id FROM concert").fired.is_empty());
    // Words, not letters: `cert` is not in concert_name.
    assert!(run("SELECT cert FROM concert").fired.is_empty());
}

#[test]
fn columns_of_the_table_a_foreign_key_points_to() {
    // name and age are singer's; singer_in_concert points to singer and concert.
    let a = run("SELECT name FROM singer_in_concert WHERE concert_id = 1");
    assert_eq!(
        a.sql,
        "SELECT singer.name FROM singer_in_concert JOIN singer ON singer_in_concert.singer_id = singer.singer_id WHERE singer_in_concert.concert_id = 1"
    );
    assert_eq!(a.fired, vec!["agent: singer joined on singer_in_concert.singer_id for name".to_string()]);
    // With an alias, a column written with it, and ORDER BY.
    assert_eq!(
        run("SELECT s.name, singer_id FROM singer_in_concert AS s ORDER BY age DESC").sql,
        "SELECT singer.name, s.singer_id FROM singer_in_concert AS s JOIN singer ON s.singer_id = singer.singer_id ORDER BY singer.age DESC"
    );
    // capacity is the stadium's, concert's key points there.
    assert_eq!(
        run("SELECT concert_name, capacity FROM concert").sql,
        "SELECT concert.concert_name, stadium.capacity FROM concert JOIN stadium ON concert.stadium_id = stadium.stadium_id"
    );
    // The table has them: nothing to join.
    assert!(run("SELECT name FROM singer").fired.is_empty());
    // `*` returns the table's own columns: it would grow by the joined table's.
    assert_eq!(
        run("SELECT * FROM singer_in_concert WHERE name = 'x'").sql,
        "SELECT singer_in_concert.* FROM singer_in_concert JOIN singer ON singer_in_concert.singer_id = singer.singer_id WHERE singer.name = 'x'"
    );
    assert_eq!(
        run("SELECT DISTINCT * FROM singer_in_concert AS s WHERE age > 30").sql,
        "SELECT DISTINCT s.* FROM singer_in_concert AS s JOIN singer ON s.singer_id = singer.singer_id WHERE singer.age > 30"
    );
    // A key column that needs quotes is written as its identifier, once.
    let mut s = star_schema();
    let key = s.tables[0].columns.iter_mut().find(|c| c.name == "stadium_id").expect("concert.stadium_id");
    key.name = "StadiumId".into();
    key.ident = "\"StadiumId\"".into();
    s.foreign_keys[0].columns = vec!["\"StadiumId\"".into()];
    assert_eq!(
        align("SELECT capacity FROM concert", &s, Context::default(), &mut Index, Rules::ALL).sql,
        "SELECT stadium.capacity FROM concert JOIN stadium ON concert.\"StadiumId\" = stadium.stadium_id"
    );
    // Its subqueries are their own business: one that needs nothing is left alone.
    let sql = "SELECT concert_id FROM singer_in_concert WHERE singer_id IN (SELECT singer_id FROM singer WHERE age > 30)";
    assert!(run(sql).fired.is_empty(), "{:?}", run(sql).fired);
}

#[test]
fn columns_of_two_tables_two_keys_point_to() {
    // age is singer's, year the concert's: no one table has both, each has one key to it.
    let a = run("SELECT age, year FROM singer_in_concert");
    assert_eq!(
        a.sql,
        "SELECT singer.age, concert.year FROM singer_in_concert JOIN singer ON singer_in_concert.singer_id = singer.singer_id \
         JOIN concert ON singer_in_concert.concert_id = concert.concert_id"
    );
    assert_eq!(
        a.fired,
        vec![
            "agent: singer joined on singer_in_concert.singer_id for age".to_string(),
            "agent: concert joined on singer_in_concert.concert_id for year".to_string()
        ]
    );
    // A name both tables have, alone or with another: which key is meant is a guess.
    let mut s = star_schema();
    let name = s.tables[1].columns.iter().find(|c| c.name == "name").cloned().expect("singer.name");
    s.tables[0].columns.push(name);
    for sql in ["SELECT name FROM singer_in_concert", "SELECT concert_name, age, name FROM singer_in_concert"] {
        let a = align(sql, &s, Context::default(), &mut Index, Rules::ALL);
        assert!(a.fired.iter().all(|f| !f.contains("joined on")), "{sql}: {:?}", a.fired);
    }
    // One table has them all (singer: name and age): that one, as before.
    let a = align("SELECT name, age FROM singer_in_concert", &s, Context::default(), &mut Index, Rules::ALL);
    assert_eq!(a.fired, vec!["agent: singer joined on singer_in_concert.singer_id for age, name".to_string()]);
    // Each table's own name for a column of its own: concert_name the concert's, name the singer's.
    assert_eq!(
        run("SELECT concert_name, name FROM singer_in_concert").sql,
        "SELECT concert.concert_name, singer.name FROM singer_in_concert JOIN concert ON singer_in_concert.concert_id = concert.concert_id \
         JOIN singer ON singer_in_concert.singer_id = singer.singer_id"
    );
    // A column named as a function written alone (`user`): quoted, the parent's column, joined;
    // bare, PostgreSQL's current_user, nothing joined.
    let mut u = star_schema();
    let mut user = u.tables[1].columns.iter().find(|c| c.name == "name").cloned().expect("singer.name");
    (user.name, user.ident) = ("user".into(), "\"user\"".into());
    u.tables[1].columns.push(user);
    let quoted = align("SELECT \"user\" FROM singer_in_concert", &u, Context::default(), &mut Index, Rules::ALL);
    assert_eq!(quoted.sql, "SELECT singer.\"user\" FROM singer_in_concert JOIN singer ON singer_in_concert.singer_id = singer.singer_id");
    let bare = align("SELECT user FROM singer_in_concert", &u, Context::default(), &mut Index, Rules::ALL);
    assert!(bare.fired.iter().all(|f| !f.contains("joined on")), "{:?}", bare.fired);
    // A column no key reaches (capacity is the stadium's, two keys away): nothing joined.
    assert!(run("SELECT age, capacity FROM singer_in_concert").fired.iter().all(|f| !f.contains("joined on")));
}

#[test]
fn no_table_joined_where_a_key_may_meet_several_rows_or_its_name_is_taken() {
    // A relationship a DBA stored to a column that is not the parent's primary key (values may
    // repeat): joining on it could multiply the rows. To the primary key it is one row.
    let mut s = star_schema();
    let fk = s.foreign_keys.iter_mut().find(|f| f.ref_table == "singer").expect("key to singer");
    fk.enforced = false;
    let to_key = align("SELECT age FROM singer_in_concert", &s, Context::default(), &mut Index, Rules::ALL);
    assert_eq!(to_key.fired, vec!["agent: singer joined on singer_in_concert.singer_id for age".to_string()]);
    let fk = s.foreign_keys.iter_mut().find(|f| f.ref_table == "singer").expect("key to singer");
    fk.ref_columns = vec!["country".into()];
    let to_any = align("SELECT age FROM singer_in_concert", &s, Context::default(), &mut Index, Rules::ALL);
    assert!(to_any.fired.iter().all(|f| !f.contains("joined on")), "{:?}", to_any.fired);
    // A CTE of the parent's name: the join would read the CTE.
    let cte = "WITH concert AS (SELECT * FROM concert WHERE year = 2014) SELECT count(*) FROM singer_in_concert WHERE year = 2015";
    assert!(run(cte).fired.iter().all(|f| !f.contains("joined on")), "{:?}", run(cte).fired);
    // A subquery reading the parent's name or one of its columns no table of the subquery has:
    // after the join it would read the joined table.
    for sql in [
        "SELECT age FROM singer_in_concert WHERE EXISTS (SELECT 1 FROM concert WHERE singer.name = 'x')",
        "SELECT age FROM singer_in_concert WHERE concert_id IN (SELECT concert_id FROM concert WHERE country = 'x')",
    ] {
        assert!(run(sql).fired.iter().all(|f| !f.contains("joined on")), "{sql}: {:?}", run(sql).fired);
    }
    // One whose own table has the column reads its own: the join goes ahead.
    let own = run("SELECT name FROM singer_in_concert WHERE singer_id IN (SELECT singer_id FROM singer WHERE age > 30)");
    assert_eq!(own.fired, vec!["agent: singer joined on singer_in_concert.singer_id for name".to_string()]);
    // An output alias that is a column of the joined table: `GROUP BY name` would group by
    // singer.name after the join. Another alias does not stop it.
    let alias = run("SELECT concert_id AS name, count(*) FROM singer_in_concert WHERE age > 30 GROUP BY name");
    assert!(alias.fired.iter().all(|f| !f.contains("joined on")), "{:?}", alias.fired);
    let other = run("SELECT concert_id AS n, count(*) FROM singer_in_concert WHERE age > 30 GROUP BY n");
    assert_eq!(other.fired, vec!["agent: singer joined on singer_in_concert.singer_id for age".to_string()]);
    let rollup = run("SELECT concert_id AS name, count(*) FROM singer_in_concert WHERE age > 30 GROUP BY ROLLUP (name)");
    assert!(rollup.fired.iter().all(|f| !f.contains("joined on")), "{:?}", rollup.fired);
    // In ORDER BY an output alias comes first, and an alias not grouped by reads nothing: joined.
    for sql in [
        "SELECT concert_id AS name FROM singer_in_concert WHERE age > 30 ORDER BY name",
        "SELECT upper(country) AS country FROM singer_in_concert WHERE age > 30",
    ] {
        assert_eq!(run(sql).fired, vec!["agent: singer joined on singer_in_concert.singer_id for age".to_string()], "{sql}");
    }
}

#[test]
fn each_select_of_a_set_operation_gets_the_table_its_key_points_to() {
    // The year is the concert's: each side of the INTERSECT on its own.
    let a = run("SELECT singer_id FROM singer_in_concert WHERE year = 2014 INTERSECT SELECT singer_id FROM singer_in_concert WHERE year = 2015");
    assert_eq!(
        a.sql,
        "SELECT singer_in_concert.singer_id FROM singer_in_concert JOIN concert ON singer_in_concert.concert_id = concert.concert_id WHERE concert.year = 2014 \
         INTERSECT SELECT singer_in_concert.singer_id FROM singer_in_concert JOIN concert ON singer_in_concert.concert_id = concert.concert_id WHERE concert.year = 2015"
    );
    assert_eq!(a.fired.len(), 2, "{:?}", a.fired);
    // A side whose table has the column is left as it is.
    let b = run("SELECT name FROM singer UNION SELECT singer_id FROM singer_in_concert WHERE year = 2014");
    assert!(b.sql.starts_with("SELECT name FROM singer UNION SELECT singer_in_concert.singer_id FROM singer_in_concert JOIN concert"), "{}", b.sql);
}

#[test]
fn subqueries_get_the_table_a_foreign_key_points_to() {
    // The year is the concert's: the subquery's own table points there.
    let a = run("SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM singer_in_concert WHERE year = 2014)");
    assert_eq!(
        a.sql,
        "SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_in_concert.singer_id FROM singer_in_concert \
         JOIN concert ON singer_in_concert.concert_id = concert.concert_id WHERE concert.year = 2014)"
    );
    assert_eq!(a.fired, vec!["agent: concert joined on singer_in_concert.concert_id for year".to_string()]);
    // In a scalar subquery two levels down.
    assert_eq!(
        run("SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE concert_id = (SELECT max(concert_id) FROM singer_in_concert WHERE age > 30))").sql,
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE concert_id = (SELECT max(singer_in_concert.concert_id) \
         FROM singer_in_concert JOIN singer ON singer_in_concert.singer_id = singer.singer_id WHERE singer.age > 30))"
    );
    // Where the enclosing query reads the table that has the column, PostgreSQL takes it from
    // there (a correlated subquery): nothing joined.
    let from_outside = "SELECT concert_name FROM concert WHERE stadium_id = (SELECT max(stadium_id) FROM singer_in_concert WHERE year > 2000)";
    assert!(run(from_outside).fired.is_empty(), "{:?}", run(from_outside).fired);
    // A name a table of the enclosing query has may be that query's column (a correlated
    // subquery PostgreSQL resolves outside): nothing joined.
    let correlated = "SELECT concert_name FROM concert WHERE EXISTS (SELECT 1 FROM singer_in_concert WHERE concert_id = 1 AND year = 2014)";
    assert!(run(correlated).fired.is_empty(), "{:?}", run(correlated).fired);
    // A column written with the enclosing query's alias: left as written.
    let outer = "SELECT c.concert_name FROM concert AS c WHERE EXISTS (SELECT 1 FROM singer_in_concert WHERE c.year = 2014)";
    assert!(run(outer).fired.is_empty(), "{:?}", run(outer).fired);
}

fn run(sql: &str) -> Aligned {
    let mut s = star_schema();
    // singer.age is nullable, singer_in_concert.singer_id is a NOT NULL foreign key.
    s.tables[2].columns[1].not_null = true;
    s.tables[2].columns[0].not_null = true;
    align(sql, &s, Context::default(), &mut Index, Rules::ALL)
}

#[test]
fn unchanged_when_nothing_is_wrong() {
    let a = run("SELECT name FROM singer WHERE country = 'France'");
    assert_eq!(a, Aligned { sql: "SELECT name FROM singer WHERE country = 'France'".into(), fired: vec![] });
}

#[test]
fn agent_fixes_names() {
    let a = run("SELECT nme, s.contry FROM singers AS s");
    assert_eq!(a.sql, "SELECT name, s.country FROM singer AS s");
    assert_eq!(a.fired.len(), 3, "{:?}", a.fired);
    // Output aliases and functions are not columns.
    let b = run("SELECT count(*) AS total FROM singer ORDER BY total DESC, current_date");
    assert!(b.fired.is_empty(), "{:?}", b.fired);
    // Ambiguous: stadium.name and singer.name are both close to "nam".
    let c = run("SELECT nam FROM singer, stadium");
    assert!(c.fired.is_empty(), "{:?}", c.fired);
}

#[test]
fn agent_fixes_values_from_complete_statistics() {
    let s = crate::schema::tests::sample_schema();
    let a = align("SELECT name FROM singer WHERE country = 'FRANCE' AND name = 'rose white'", &s, Context::default(), &mut Nothing, Rules::ALL);
    // country's three values are all known; name's six are too.
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'France' AND name = 'Rose White'");
    let b = align("SELECT name FROM singer WHERE country = 'Spain'", &s, Context::default(), &mut Nothing, Rules::ALL);
    assert!(b.fired.is_empty(), "absent values stay: the answer may be no rows");
}

#[test]
fn aggregates_inside_subqueries_are_left_alone() {
    let sql = "SELECT name FROM singer WHERE age = (SELECT max(age) FROM singer)";
    assert!(run(sql).fired.is_empty(), "{:?}", run(sql).fired);
    let a = run("SELECT name FROM singer WHERE age > avg(age) AND age IN (SELECT min(age) FROM singer)");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer) AND age IN (SELECT min(age) FROM singer)");
}

#[test]
fn agent_fixes_values() {
    let a = run("SELECT name FROM singer WHERE country = 'france' OR country IN ('UNITED STATES', 'France')");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'France' OR country IN ('United States', 'France')");
    assert_eq!(a.fired.len(), 2);
    // A stranger's table (off the search path, an owner not trusted): her stored values are
    // never written into a query; trusted, the same table's are.
    let mut s = star_schema();
    let singer = s.tables.iter_mut().find(|t| t.name == "singer").expect("singer");
    singer.ident = "mal.singer".into();
    singer.schema = "mal".into();
    for trusted in [false, true] {
        s.tables.iter_mut().find(|t| t.name == "singer").expect("singer").owner_trusted = trusted;
        let a = align("SELECT name FROM mal.singer WHERE country = 'france'", &s, Context::default(), &mut Index, Rules::ALL);
        let fixed = a.sql.contains("'France'");
        assert_eq!(fixed, trusted, "{trusted}: {a:?}");
    }
}

#[test]
fn function_aggregate_in_where() {
    let a = run("SELECT name FROM singer WHERE age = max(age)");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE age = (SELECT max(age) FROM singer)");
}

#[test]
fn function_aggregate_in_order_by() {
    let a = run("SELECT name FROM singer ORDER BY max(age) DESC LIMIT 1");
    // age is nullable, so the style rule adds its IS NOT NULL too.
    assert_eq!(a.sql, "SELECT name FROM singer WHERE age IS NOT NULL ORDER BY age DESC LIMIT 1");
    assert!(a.fired[0].starts_with("function: max() in ORDER BY"), "{:?}", a.fired);
}

#[test]
fn function_nested_aggregates() {
    let a = run("SELECT country, max(count(*)) FROM singer GROUP BY country");
    assert_eq!(a.sql, "SELECT country, count(*) FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1");
    // With a LIMIT of its own, or two nested aggregates, no rewrite says the same.
    assert!(run("SELECT max(count(*)) FROM singer GROUP BY country LIMIT 5").fired.is_empty());
    assert!(run("SELECT max(count(*)), min(count(*)) FROM singer GROUP BY country").fired.is_empty());
}

#[test]
fn function_redundant_join() {
    let a = run("SELECT count(*) FROM singer_in_concert AS sic JOIN singer AS s ON sic.singer_id = s.singer_id");
    assert_eq!(a.sql, "SELECT count(*) FROM singer_in_concert AS sic");
    // Used elsewhere: kept.
    let b = run("SELECT s.name FROM singer_in_concert AS sic JOIN singer AS s ON sic.singer_id = s.singer_id");
    assert!(b.fired.is_empty(), "{:?}", b.fired);
}

#[test]
fn style_nulls_under_limit() {
    let a = run("SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC LIMIT 1");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE (country = 'France') AND age IS NOT NULL ORDER BY age DESC LIMIT 1");
    // A NOT NULL column, or no LIMIT: nothing to do.
    assert!(run("SELECT concert_id FROM singer_in_concert ORDER BY singer_id LIMIT 1").fired.is_empty());
    assert!(run("SELECT name FROM singer ORDER BY age DESC").fired.is_empty());
    // NULLs already come last: ascending order, or DESC NULLS LAST.
    assert!(run("SELECT name FROM singer ORDER BY age LIMIT 1").fired.is_empty());
    assert!(run("SELECT name FROM singer ORDER BY age DESC NULLS LAST LIMIT 1").fired.is_empty());
    assert_eq!(run("SELECT name FROM singer ORDER BY age NULLS FIRST LIMIT 1").fired.len(), 1);
}

#[test]
fn style_select_list() {
    let mut s = star_schema();
    let a = align("SELECT singer_id, name FROM singer", &s, Context { select: &["name of the singer".into()], linked: &[], shown: &[], question: "" }, &mut Index, Rules::ALL);
    assert_eq!(a.sql, "SELECT name FROM singer");
    let b = align("SELECT singer_id, name FROM singer", &s, Context { select: &["singer id".into(), "name".into()], linked: &[], shown: &[], question: "" }, &mut Index, Rules::ALL);
    assert!(b.fired.is_empty());
    // The rule runs (three columns, two asked for) and keeps the id that was asked for.
    let c = align("SELECT singer_id, name, age FROM singer", &s, Context { select: &["singer id".into(), "name".into()], linked: &[], shown: &[], question: "" }, &mut Index, Rules::ALL);
    assert!(c.fired.is_empty(), "{:?}", c.fired);
    // Only keys go: a column ending in "id" that is no key ("paid") stays.
    let mut paid = star_schema();
    paid.tables[1].columns.push(serde_json::from_value(serde_json::json!({"name": "paid", "ident": "paid", "data_type": "boolean", "comment": null})).expect("column"));
    let d = align("SELECT paid, name FROM singer", &paid, Context { select: &["name".into()], linked: &[], shown: &[], question: "" }, &mut Index, Rules::ALL);
    assert!(d.fired.is_empty(), "{:?}", d.fired);
    // A foreign key nobody asked for goes.
    let e = align("SELECT sic.singer_id, sic.concert_id FROM singer_in_concert AS sic", &s, Context { select: &["concert".into()], linked: &[], shown: &[], question: "" }, &mut Index, Rules::ALL);
    assert!(e.fired.is_empty(), "both are keys: trimming would leave nothing asked for");
    let f = align("SELECT stadium_id, name FROM stadium", &s, Context { select: &["stadium name".into()], linked: &[], shown: &[], question: "" }, &mut Index, Rules::ALL);
    assert_eq!(f.sql, "SELECT name FROM stadium");
    s.tables.clear();
    assert!(align("not sql", &s, Context::default(), &mut Index, Rules::ALL).fired.is_empty());
}

#[test]
fn rules_can_be_switched_off() {
    let s = star_schema();
    let none = Rules::NONE;
    assert!(align("SELECT nme FROM singers", &s, Context::default(), &mut Index, none).fired.is_empty());
}

#[test]
fn the_typo_search_is_cancellable_and_skips_names_of_other_lengths() {
    thread_local! { static CALLS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) }; }
    crate::interrupt::register(|| CALLS.set(CALLS.get() + 1));
    // A wide table: 3,000 columns.
    let mut s = star_schema();
    let mut col = s.tables[1].columns[0].clone();
    for i in 0..3_000 {
        col.name = format!("measure_{i:04}_value");
        col.ident = col.name.clone();
        s.tables[1].columns.push(col.clone());
    }
    // A typo is still found among them; a name far longer than any column is compared to none.
    let fixed = align("SELECT measure_0042_valeu FROM singer", &s, Context::default(), &mut Index, Rules::ALL);
    assert_eq!(fixed.sql, "SELECT measure_0042_value FROM singer");
    let long = format!("SELECT {} FROM singer", "x".repeat(10_000));
    assert!(align(&long, &s, Context::default(), &mut Index, Rules::ALL).fired.is_empty());
    assert!(CALLS.get() >= 20, "{}", CALLS.get());
}

#[test]
fn keys_no_foreign_key_links_are_joined_through_the_table_that_links_them() {
    let s = star_schema();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    // A singer's id read as a concert's: through singer_in_concert.
    let a = fix("SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id");
    assert_eq!(
        a.sql,
        "SELECT s.name FROM singer AS s JOIN singer_in_concert ON singer_in_concert.singer_id = s.singer_id \
         JOIN concert AS c ON c.concert_id = singer_in_concert.concert_id"
    );
    assert!(a.fired.contains(&"agent: singer joined to concert through singer_in_concert".to_string()), "{:?}", a.fired);
    // A key pointing one way and one pointed at the other: through concert; either side first.
    assert_eq!(
        fix("SELECT count(*) FROM stadium JOIN singer_in_concert AS x ON x.concert_id = stadium.stadium_id").sql,
        "SELECT count(*) FROM stadium JOIN concert ON concert.stadium_id = stadium.stadium_id \
         JOIN singer_in_concert AS x ON x.concert_id = concert.concert_id"
    );
    // A key equated to a column the other table lacks (a concert has no singer_id):
    // singer_in_concert has it, linked to the key, and a key to the concert; the same join as
    // the first case's, and either side may lack it.
    let b = fix("SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id");
    assert_eq!((&b.sql, &b.fired), (&a.sql, &a.fired));
    assert_eq!(
        fix("SELECT c.year FROM concert AS c JOIN singer ON c.singer_id = singer.singer_id").sql,
        "SELECT c.year FROM concert AS c JOIN singer_in_concert ON singer_in_concert.concert_id = c.concert_id \
         JOIN singer ON singer.singer_id = singer_in_concert.singer_id"
    );
    // Left alone: the two ends of one foreign key; columns that are no keys; outer joins; the
    // bridge already in the statement; more than one condition; a missing column whose holder
    // has no key to the lacking table (concert has a stadium_id, no key links it to a singer),
    // that no other table has, or missing on both sides.
    for sql in [
        "SELECT 1 FROM stadium JOIN singer ON stadium.stadium_id = singer.stadium_id",
        "SELECT 1 FROM singer JOIN concert ON singer.singer_id = concert.performer_id",
        "SELECT 1 FROM singer JOIN concert ON singer.band_id = concert.band_id",
        "SELECT 1 FROM singer AS s LEFT JOIN concert AS c ON s.singer_id = c.singer_id",
        "SELECT 1 FROM singer_in_concert JOIN singer AS s ON true JOIN concert AS c ON s.singer_id = c.singer_id",
        "SELECT 1 FROM concert JOIN stadium ON concert.stadium_id = stadium.stadium_id",
        "SELECT 1 FROM singer JOIN concert ON singer.age = concert.year",
        "SELECT 1 FROM singer AS s LEFT JOIN concert AS c ON s.singer_id = c.concert_id",
        "SELECT 1 FROM singer_in_concert JOIN singer AS s ON true JOIN concert AS c ON s.singer_id = c.concert_id",
        "SELECT 1 FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id AND c.year = '2014'",
    ] {
        assert!(!fix(sql).fired.iter().any(|f| f.contains("through")), "{sql}: {:?}", fix(sql).fired);
    }
}

#[test]
fn a_bridge_is_no_cte_and_its_name_cannot_become_sql() {
    let s = star_schema();
    let fix = |s: &Schema, sql: &str| align(sql, s, Context::default(), &mut Index, Rules::ALL);
    // A CTE named like the catalog's table hides it: its columns are the CTE's.
    let cte = "WITH concert AS (SELECT singer_id, 2014 AS year FROM singer_in_concert) \
               SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id";
    assert!(!fix(&s, cte).fired.iter().any(|f| f.contains("through")), "{:?}", fix(&s, cte).fired);
    // A table owner's bridge named to close its quoted identifier early (sqlparser prints a
    // quote after a backslash undoubled): the rewrite is dropped rather than read as her SQL.
    let mut hostile = s.clone();
    let name = "a\\\" IS NULL JOIN stadium ON 1=1--";
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    for t in hostile.tables.iter_mut().filter(|t| t.name == "singer_in_concert") {
        t.name = name.to_string();
        t.ident = quoted.clone();
    }
    for fk in hostile.foreign_keys.iter_mut().filter(|fk| fk.table == "singer_in_concert") {
        fk.table = quoted.clone();
    }
    let a = fix(&hostile, "SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id");
    assert!(!a.sql.contains("1=1") && !a.sql.contains("JOIN stadium"), "{}", a.sql);
    // A bridge whose name holds two quotes in a row: sqlparser would print it as `"sic""x"`, the
    // owner's decoy sic"x: the rewrite is dropped.
    let mut doubled = s.clone();
    let name = "sic\"\"x";
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    for t in doubled.tables.iter_mut().filter(|t| t.name == "singer_in_concert") {
        t.name = name.to_string();
        t.ident = quoted.clone();
    }
    for fk in doubled.foreign_keys.iter_mut().filter(|fk| fk.table == "singer_in_concert") {
        fk.table = quoted.clone();
    }
    let a = fix(&doubled, "SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id");
    assert!(a.fired.is_empty() && !a.sql.contains("sic"), "{:?} {}", a.fired, a.sql);
}

/// brand(id integer, name text, code integer), product(id integer, brand integer -> brand.id,
/// title text): the foreign key's name says "brand", it holds the brand's id.
fn brands() -> crate::schema::Schema {
    let col = |n: &str, t: &str, cat: &str| serde_json::json!({"name": n, "ident": n, "data_type": t, "category": cat, "comment": null});
    serde_json::from_value(serde_json::json!({
        "tables": [
            {"oid": 1, "schema": "public", "name": "brand", "ident": "brand", "kind": "r", "comment": null, "primary_key": ["id"],
             "columns": [col("id", "integer", "N"), col("name", "text", "S"), col("code", "integer", "N")]},
            {"oid": 2, "schema": "public", "name": "product", "ident": "product", "kind": "r", "comment": null, "primary_key": ["id"],
             "columns": [col("id", "integer", "N"), col("brand", "integer", "N"), col("title", "text", "S")]},
        ],
        "foreign_keys": [{"table": "product", "columns": ["brand"], "ref_table": "brand", "ref_columns": ["id"]}]
    }))
    .expect("brands")
}

#[test]
fn a_foreign_key_compared_with_the_wrong_column_of_its_table() {
    let s = brands();
    let run = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    let a = run("SELECT id, name FROM brand WHERE name IN (SELECT brand FROM product GROUP BY brand HAVING count(*) > 3)");
    assert_eq!(a.sql, "SELECT id, name FROM brand WHERE id IN (SELECT brand FROM product GROUP BY brand HAVING count(*) > 3)");
    assert_eq!(a.fired, vec!["agent: brand.name compared with product.brand -> brand.id (the key it references)".to_string()]);
    // In a join's condition, either way round, qualified or not.
    assert_eq!(
        run("SELECT p.title FROM product AS p JOIN brand AS b ON b.name = p.brand WHERE b.name = 'Acme'").sql,
        "SELECT p.title FROM product AS p JOIN brand AS b ON b.id = p.brand WHERE b.name = 'Acme'"
    );
    assert_eq!(
        run("SELECT title FROM product JOIN brand ON product.brand = brand.name").sql,
        "SELECT title FROM product JOIN brand ON product.brand = brand.id"
    );
    // A column of the key's own type may be meant (PostgreSQL runs it): left alone. So are the
    // referenced column itself, another table's column, and a name two tables of a level hold.
    for sql in [
        "SELECT title FROM product JOIN brand ON product.brand = brand.code",
        "SELECT title FROM product JOIN brand ON product.brand = brand.id",
        "SELECT id FROM brand WHERE id IN (SELECT brand FROM product)",
        "SELECT title FROM product WHERE title IN (SELECT brand FROM product)",
        "SELECT title FROM product JOIN brand ON product.brand = brand.id WHERE id = brand",
    ] {
        assert!(run(sql).fired.is_empty(), "{sql}: {:?}", run(sql).fired);
    }
}

#[test]
fn a_key_comparison_reads_each_name_where_it_is_written() {
    let s = brands();
    let run = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    // An alias given again in a subquery names that subquery's table there, the outer one
    // outside: the brand's name compared with the product's key still means the brand's id.
    assert_eq!(
        run("SELECT t.id, t.name FROM brand AS t WHERE t.name IN (SELECT t.brand FROM product AS t)").sql,
        "SELECT t.id, t.name FROM brand AS t WHERE t.id IN (SELECT t.brand FROM product AS t)"
    );
    assert_eq!(
        run("SELECT x.title FROM product AS x JOIN brand AS b ON b.name = x.brand WHERE EXISTS (SELECT 1 FROM brand AS x WHERE x.code = 1)").sql,
        "SELECT x.title FROM product AS x JOIN brand AS b ON b.id = x.brand WHERE EXISTS (SELECT 1 FROM brand AS x WHERE x.code = 1)"
    );
    // Nothing is renamed where the name reads a CTE (also one named as a table), a derived
    // table or an alias no FROM item there declares: their columns are not the table's.
    for sql in [
        "WITH brand AS (SELECT title AS name, id FROM product) SELECT name FROM brand WHERE name IN (SELECT brand FROM product)",
        "WITH b AS (SELECT title AS name FROM product) SELECT name FROM b, brand WHERE name IN (SELECT brand FROM product)",
        "SELECT d.name FROM (SELECT title AS name FROM product) AS d WHERE d.name IN (SELECT brand FROM product)",
        "SELECT p.title FROM product AS p WHERE q.name = p.brand",
        "SELECT p.title FROM product AS p WHERE p.brand IN (SELECT b.id FROM brand AS b) AND p.title IN (SELECT b.name FROM brand AS b)",
    ] {
        assert!(run(sql).fired.iter().all(|f| !f.contains("the key it references")), "{sql}: {:?}", run(sql).fired);
    }
    // Nor where the new name would read another column where it is written: a bare `id` in a
    // subquery reads the subquery's table, beside a join it is ambiguous.
    for sql in [
        "SELECT name FROM brand WHERE EXISTS (SELECT 1 FROM product WHERE product.brand = name)",
        "SELECT title FROM product JOIN brand ON product.brand = name",
    ] {
        assert!(run(sql).fired.iter().all(|f| !f.contains("the key it references")), "{sql}: {:?}", run(sql).fired);
    }
    // A query's ORDER BY reads its own FROM.
    assert_eq!(
        run("SELECT id FROM brand ORDER BY name IN (SELECT brand FROM product) DESC").sql,
        "SELECT id FROM brand ORDER BY id IN (SELECT brand FROM product) DESC"
    );
    // Qualified, the same comparison is fixed.
    assert_eq!(
        run("SELECT b.name FROM brand AS b WHERE EXISTS (SELECT 1 FROM product WHERE product.brand = b.name)").sql,
        "SELECT b.name FROM brand AS b WHERE EXISTS (SELECT 1 FROM product WHERE product.brand = b.id)"
    );
}

#[test]
fn agent_spelled_out_codes_become_the_code() {
    let mut s = crate::schema::tests::sample_schema();
    let singer = s.tables.iter_mut().find(|t| t.name == "singer").expect("singer");
    let country = singer.columns.iter_mut().find(|c| c.name == "country").expect("country");
    country.stats = Some(crate::schema::ColumnStats { values: vec!["F".into(), "M".into()], distinct: 2, complete: true, min: None, max: None });
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut Nothing, Rules::ALL);
    let a = fix("SELECT name FROM singer WHERE country = 'Female' OR country = 'male'");
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'F' OR country = 'M'");
    assert!(a.fired.iter().any(|f| f.ends_with("'Female' -> 'F' (a code)")), "{:?}", a.fired);
    // No code starts it, or the literal is a code's length itself: left alone.
    assert!(fix("SELECT name FROM singer WHERE country = 'Other'").fired.is_empty());
    assert!(fix("SELECT name FROM singer WHERE country = 'Fm'").fired.is_empty());
    // A stored value with no letter or digit ('?') is no code every word starts with.
    let country = s.tables.iter_mut().find(|t| t.name == "singer").and_then(|t| t.columns.iter_mut().find(|c| c.name == "country")).expect("country");
    country.stats = Some(crate::schema::ColumnStats { values: vec!["F".into(), "?".into()], distinct: 2, complete: true, min: None, max: None });
    assert!(align("SELECT name FROM singer WHERE country = 'Other'", &s, Context::default(), &mut Nothing, Rules::ALL).fired.is_empty());
    // Values that are not codes: no prefix matching ('Fr' is no code for 'France').
    let country = s.tables.iter_mut().find(|t| t.name == "singer").and_then(|t| t.columns.iter_mut().find(|c| c.name == "country")).expect("country");
    country.stats = Some(crate::schema::ColumnStats { values: vec!["Fra".into(), "Mex".into()], distinct: 2, complete: true, min: None, max: None });
    assert!(align("SELECT name FROM singer WHERE country = 'France'", &s, Context::default(), &mut Nothing, Rules::ALL).fired.is_empty());
}

#[test]
fn agent_qualifies_a_column_the_join_equates() {
    let s = star_schema();
    let run = |sql: &str| align(sql, &s, Context::default(), &mut Index, Rules::ALL);
    let a = run("SELECT stadium_id, count(*) FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id GROUP BY stadium_id ORDER BY stadium_id");
    assert_eq!(a.sql, "SELECT c.stadium_id, count(*) FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id GROUP BY c.stadium_id ORDER BY c.stadium_id");
    assert_eq!(a.fired, vec!["agent: ambiguous column stadium_id -> c.stadium_id".to_string()]);
    // Three tables, equated in a chain (through a bridge), one of the conditions ANDed.
    let b = run("SELECT singer_id FROM singer JOIN singer_in_concert AS sic ON sic.singer_id = singer.singer_id AND sic.concert_id = sic.concert_id");
    assert_eq!(b.sql, "SELECT singer.singer_id FROM singer JOIN singer_in_concert AS sic ON sic.singer_id = singer.singer_id AND sic.concert_id = sic.concert_id");
    // Not equated (two different names), not every holder equated, an outer join, or inside a
    // subquery (its own scope): left to PostgreSQL.
    for sql in [
        "SELECT name FROM singer JOIN stadium ON singer.age = stadium.capacity",
        "SELECT name FROM singer JOIN singer_in_concert AS sic ON sic.singer_id = singer.singer_id JOIN concert ON concert.concert_id = sic.concert_id JOIN stadium ON stadium.stadium_id = concert.stadium_id",
        "SELECT stadium_id FROM concert LEFT JOIN stadium ON concert.stadium_id = stadium.stadium_id",
        "SELECT 1 FROM singer WHERE EXISTS (SELECT stadium_id FROM concert AS c JOIN stadium AS s ON c.year = s.name)",
    ] {
        let r = run(sql);
        assert!(!r.fired.iter().any(|f| f.contains("ambiguous")), "{sql}: {:?}", r.fired);
    }
    // Two names, each equated across its own holders.
    let c = run("SELECT name FROM singer JOIN stadium ON singer.name = stadium.name JOIN concert ON concert.stadium_id = stadium.stadium_id WHERE stadium_id = 1");
    assert_eq!(c.sql, "SELECT singer.name FROM singer JOIN stadium ON singer.name = stadium.name JOIN concert ON concert.stadium_id = stadium.stadium_id WHERE stadium.stadium_id = 1");
}

#[test]
fn function_drops_a_join_the_question_never_names() {
    let s = star_schema();
    let ask = |sql: &str, question: &str| align(sql, &s, Context { select: &[], linked: &[], shown: &[], question }, &mut Index, Rules::ALL);
    let sql = "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id ORDER BY T1.age LIMIT 1";
    let a = ask(sql, "What is the name of the youngest singer?");
    assert_eq!(a.sql, "SELECT T1.name FROM singer AS T1 ORDER BY T1.age LIMIT 1");
    assert!(a.fired.iter().any(|f| f.contains("join of singer_in_concert dropped (the question names no concert)")), "{:?}", a.fired);
    // The question names it (a plural, a longer word): kept.
    assert!(ask(sql, "Name the youngest singer who sang at concerts.").fired.is_empty());
    // Grouped or aggregated: count(*) counts the joined rows, kept.
    let counted = "SELECT T1.name, count(*) FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id GROUP BY T1.name";
    assert!(ask(counted, "the count for each singer").fired.is_empty());
    assert!(ask("SELECT count(*) FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id", "how many singers").fired.is_empty());
    // A window function counts the joined rows too; a later join by USING reads its columns
    // unseen; a bare name of its columns in a subquery may be its own: kept.
    assert!(ask("SELECT T1.name, count(*) OVER () FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id", "the singers").fired.is_empty());
    assert!(ask("SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id JOIN concert USING (concert_id)", "the singers").fired.is_empty());
    assert!(ask("SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE concert_id IN (SELECT concert_id FROM concert WHERE year = '2014')", "the singers of 2014").fired.is_empty());
    // No question (the zero-shot path, tests): kept.
    assert!(ask(sql, "").fired.is_empty());
    // Its columns are used: kept.
    let used = "SELECT T1.name, T2.concert_id FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id";
    assert!(ask(used, "the singers").fired.is_empty());
    // A bridge another join goes through: its columns are used there.
    let bridge = "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id JOIN concert AS T3 ON T3.concert_id = T2.concert_id WHERE T3.year = '2014'";
    assert!(ask(bridge, "singers in 2014").fired.is_empty());
    // The joined table is the one the foreign key points to (one row, not many): not this rule.
    let parent = "SELECT c.year FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.stadium_id";
    assert!(!ask(parent, "the years").fired.iter().any(|f| f.contains("the question names no")));
}

#[test]
fn function_drops_a_join_left_unused_once_a_later_join_is_dropped() {
    let mut s = star_schema();
    // The bridge's key columns are NOT NULL, as a primary key's are.
    s.tables[2].columns.iter_mut().for_each(|c| c.not_null = true);
    let ask = |sql: &str, question: &str| align(sql, &s, Context { select: &[], linked: &[], shown: &[], question }, &mut Index, Rules::ALL);
    // `concert` is only a lookup of the bridge's key; once it goes, the bridge is used by its ON
    // condition alone, and the question names no concert.
    let chain = "SELECT DISTINCT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id \
                 JOIN concert AS T3 ON T2.concert_id = T3.concert_id WHERE T1.age > 30";
    let a = ask(chain, "Which singers are older than 30?");
    assert_eq!(a.sql, "SELECT DISTINCT T1.name FROM singer AS T1 WHERE T1.age > 30", "{:?}", a.fired);
    assert!(a.fired.iter().any(|f| f.contains("redundant join of concert dropped")), "{:?}", a.fired);
    assert!(a.fired.iter().any(|f| f.contains("join of singer_in_concert dropped (the question names no concert)")), "{:?}", a.fired);
    // The question names concerts: the lookup goes, the bridge stays.
    let b = ask(chain, "Which singers older than 30 sang in concerts?");
    assert_eq!(b.sql, "SELECT DISTINCT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE T1.age > 30");
    // The lookup's columns are read: both stay.
    let read = "SELECT DISTINCT T1.name, T3.year FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id \
                JOIN concert AS T3 ON T2.concert_id = T3.concert_id";
    assert!(ask(read, "Which singers, and which years?").fired.is_empty());
}

#[test]
fn function_drops_a_lookup_another_drop_left_unused_in_a_later_pass() {
    let mut s = star_schema();
    s.tables[2].columns.iter_mut().for_each(|c| c.not_null = true);
    s.tables[0].columns[2].not_null = true;
    let ask = |s: &crate::schema::Schema, sql: &str| align(sql, s, Context { select: &[], linked: &[], shown: &[], question: "Which singers sang in concerts?" }, &mut Index, Rules::ALL);
    // `stadium` goes first; `concert`, read by stadium's ON condition until then, only in the
    // next pass.
    let chain = "SELECT DISTINCT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id \
                 JOIN concert AS T3 ON T2.concert_id = T3.concert_id JOIN stadium AS T4 ON T3.stadium_id = T4.stadium_id";
    let a = ask(&s, chain);
    assert_eq!(a.sql, "SELECT DISTINCT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id", "{:?}", a.fired);
    assert_eq!(a.fired.iter().filter(|f| f.contains("redundant join of")).count(), 2, "{:?}", a.fired);
    // A nullable foreign key: the join removes rows whose key is NULL, and stays.
    let mut nullable = s.clone();
    nullable.tables[0].columns[2].not_null = false;
    let b = ask(&nullable, chain);
    assert!(!b.fired.iter().any(|f| f.contains("redundant join")), "{:?}", b.fired);
}

#[test]
fn function_keeps_a_lookup_that_may_not_find_its_row() {
    let mut s = star_schema();
    s.tables[2].columns.iter_mut().for_each(|c| c.not_null = true);
    let run = |s: &crate::schema::Schema, sql: &str| align(sql, s, Context::default(), &mut Index, Rules::ALL);
    let lookup = "SELECT count(*) FROM singer_in_concert AS sic JOIN singer AS s ON sic.singer_id = s.singer_id";
    assert_eq!(run(&s, lookup).sql, "SELECT count(*) FROM singer_in_concert AS sic");
    // After an outer join the bridge's key may be NULL in a row: the inner join removes it.
    for outer in ["LEFT JOIN", "LEFT OUTER JOIN", "RIGHT JOIN", "FULL JOIN"] {
        let sql = format!(
            "SELECT c.concert_name FROM concert AS c {outer} singer_in_concert AS sic ON c.concert_id = sic.concert_id \
             JOIN singer AS s ON sic.singer_id = s.singer_id"
        );
        let a = run(&s, &sql);
        assert!(!a.fired.iter().any(|f| f.contains("join of singer")), "{outer}: {:?}", a.fired);
    }
    // An inner join before it does not: the lookup goes.
    let inner = "SELECT c.concert_name FROM concert AS c JOIN singer_in_concert AS sic ON c.concert_id = sic.concert_id \
                 JOIN singer AS s ON sic.singer_id = s.singer_id";
    assert!(run(&s, inner).fired.iter().any(|f| f.contains("redundant join of singer dropped")), "{:?}", run(&s, inner).fired);
    // A key PostgreSQL does not enforce (NOT VALID, stored by a DBA, found by profiling), or a
    // primary key profiling inferred: a row may point at nothing, or at two rows.
    let mut not_valid = s.clone();
    not_valid.foreign_keys.iter_mut().for_each(|fk| fk.enforced = false);
    let mut found = s.clone();
    found.foreign_keys.iter_mut().for_each(|fk| fk.inferred = true);
    let mut key_inferred = s.clone();
    key_inferred.tables[1].key_inferred = true;
    for schema in [&not_valid, &found, &key_inferred] {
        assert!(run(schema, lookup).fired.is_empty(), "{:?}", run(schema, lookup).fired);
    }
    // A CTE named as the table is what the join reads: its rows are not the key's.
    let cte = "WITH singer AS (SELECT * FROM singer WHERE age > 30) \
               SELECT count(*) FROM singer_in_concert AS sic JOIN singer AS s ON sic.singer_id = s.singer_id";
    assert!(!run(&s, cte).fired.iter().any(|f| f.contains("join of singer")), "{:?}", run(&s, cte).fired);
    let other_cte = "WITH old AS (SELECT * FROM singer WHERE age > 30) \
                     SELECT count(*) FROM singer_in_concert AS sic JOIN singer AS s ON sic.singer_id = s.singer_id";
    assert!(run(&s, other_cte).fired.iter().any(|f| f.contains("redundant join of singer dropped")), "{:?}", run(&s, other_cte).fired);
}

#[test]
fn function_keeps_an_unmentioned_join_after_an_outer_join() {
    let mut s = star_schema();
    s.tables[2].columns.iter_mut().for_each(|c| c.not_null = true);
    let ask = |sql: &str| align(sql, &s, Context { select: &[], linked: &[], shown: &[], question: "Which singers are older than 30?" }, &mut Index, Rules::ALL);
    // Inner joins only: the join the question never names goes.
    let inner = "SELECT s.name FROM singer AS s JOIN singer_in_concert AS sic ON s.singer_id = sic.singer_id WHERE s.age > 30";
    assert_eq!(ask(inner).sql, "SELECT s.name FROM singer AS s WHERE s.age > 30");
    // After an outer join it may be what removes the NULL-extended rows: kept.
    let outer = "SELECT s.name FROM stadium AS st LEFT JOIN singer AS s ON st.stadium_id = s.singer_id \
                 JOIN singer_in_concert AS sic ON s.singer_id = sic.singer_id WHERE s.age > 30";
    assert!(!ask(outer).fired.iter().any(|f| f.contains("join of singer_in_concert")), "{:?}", ask(outer).fired);
}

#[test]
fn style_unasked_keys_without_extraction() {
    let s = star_schema();
    let ask = |sql: &str, question: &str| align(sql, &s, Context { select: &[], linked: &[], shown: &[], question }, &mut Index, Rules::ALL);
    let sql = "SELECT s.stadium_id, count(*), s.name FROM stadium AS s JOIN concert AS c ON c.stadium_id = s.stadium_id GROUP BY s.stadium_id, s.name";
    let a = ask(sql, "For each stadium, return the number of concerts and its name.");
    assert_eq!(a.sql, "SELECT count(*), s.name FROM stadium AS s JOIN concert AS c ON c.stadium_id = s.stadium_id GROUP BY s.stadium_id, s.name");
    // Asked for ("id", or the column's own name), under DISTINCT, or nothing else of its table
    // in the list: kept.
    // (The aggregate moves behind the columns there: the question asks for it last.)
    let untrimmed = |question: &str| ask(sql, question).fired.iter().all(|f| !f.contains("trimmed"));
    assert!(untrimmed("Give each stadium's id, name and number of concerts."));
    assert!(untrimmed("What are the names and ids of the stadiums, with their concert counts?"));
    assert!(untrimmed("Show the stadium_id, the name and the count."));
    assert!(ask("SELECT DISTINCT s.stadium_id, s.name FROM stadium AS s", "stadium names").fired.is_empty());
    assert!(ask("SELECT c.stadium_id, count(*) FROM concert AS c GROUP BY c.stadium_id", "concerts per stadium").fired.is_empty());
    // The list referred to by position, a self-join (the name is another row's), a key that is
    // no id (a text key such as a name is an answer): kept.
    assert!(ask("SELECT s.stadium_id, s.name FROM stadium AS s ORDER BY 1", "stadium names").fired.is_empty());
    assert!(ask("SELECT s.stadium_id, s.name, count(*) FROM stadium AS s JOIN concert AS c ON c.stadium_id = s.stadium_id GROUP BY 1, 2", "names and concerts").fired.is_empty());
    assert!(ask("SELECT a.stadium_id, b.name FROM stadium AS a JOIN stadium AS b ON a.capacity = b.capacity", "stadium names").fired.is_empty());
    let mut named = star_schema();
    named.tables[3].primary_key = vec!["name".into()];
    let by_name = align("SELECT name, capacity FROM stadium", &named, Context { select: &[], linked: &[], shown: &[], question: "the stadiums and their capacity" }, &mut Index, Rules::ALL);
    assert!(by_name.fired.is_empty(), "{:?}", by_name.fired);
}

#[test]
fn style_select_list_in_the_order_asked() {
    let s = star_schema();
    let ask = |sql: &str, question: &str| align(sql, &s, Context { select: &[], linked: &[], shown: &[], question }, &mut Index, Rules::ALL);
    // Aggregates asked for before the column they are grouped by come first, in their own order.
    let a = ask("SELECT country, avg(age) AS mean_age, max(age) FROM singer GROUP BY country", "Find the average and the oldest age for each country.");
    assert_eq!(a.sql, "SELECT avg(age) AS mean_age, max(age), country FROM singer GROUP BY country");
    assert!(a.fired.iter().any(|f| f.contains("in the order the question asks")), "{:?}", a.fired);
    // ... and the other way round; a name of words run together is named by its parts.
    let b = ask("SELECT count(*), s.name FROM stadium AS s JOIN concert AS c ON c.stadium_id = s.stadium_id GROUP BY s.name", "Give the name of each stadium and its number of concerts.");
    assert_eq!(b.sql, "SELECT s.name, count(*) FROM stadium AS s JOIN concert AS c ON c.stadium_id = s.stadium_id GROUP BY s.name");
    let c = ask("SELECT songname, count(*) FROM singer GROUP BY songname", "What is the count for each song name?");
    assert_eq!(c.sql, "SELECT count(*), songname FROM singer GROUP BY songname");
    // A listing clause that names every item decides, not an earlier mention of a column.
    let d = ask("SELECT country, count(*) FROM singer GROUP BY country", "For each singer country, list the number of singers and the country.");
    assert_eq!(d.sql, "SELECT count(*), country FROM singer GROUP BY country");
    // Left as written: already in order; "how many" opening the question (the count is its
    // subject, not a place in a list); an item the question does not name; the kinds interleaved
    // in the question; an item that is neither a column nor an aggregate; the list referred to by
    // position; a subquery's list; a set operation; no question.
    let unchanged = |sql: &str, question: &str| {
        let a = ask(sql, question);
        assert!(a.fired.iter().all(|f| !f.contains("in the order")), "{sql} / {question}: {:?}", a.fired);
    };
    unchanged("SELECT country, count(*) FROM singer GROUP BY country", "Show each country and the number of singers there.");
    unchanged("SELECT country, count(*) FROM singer GROUP BY country", "How many singers are from each country?");
    unchanged("SELECT country, count(*) FROM singer GROUP BY country", "Which places do the performers come from?");
    unchanged("SELECT country, max(age), name FROM singer GROUP BY country, name", "For each country give the highest age and the name.");
    unchanged("SELECT country, count(*) + 1 FROM singer GROUP BY country", "The number of singers plus one for each country.");
    unchanged("SELECT country, count(*) FROM singer GROUP BY 1", "The number of singers for each country.");
    unchanged("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", "names of singers older than the average");
    unchanged("SELECT country, count(*) FROM singer GROUP BY country UNION SELECT 'all', count(*) FROM singer", "The number of singers for each country.");
    unchanged("SELECT country, count(*) FROM singer GROUP BY country", "");
}

#[test]
fn agent_the_table_that_has_every_column() {
    let s = star_schema();
    let ask = |sql: &str, question: &str, linked: &[String]| align(sql, &s, Context { select: &[], linked, shown: &[], question }, &mut Index, Rules::ALL);
    let switched = |a: &Aligned| a.fired.iter().any(|f| f.contains("it has every column"));
    // concert has neither column; stadium has both (singer only the name); the question says
    // nothing of concerts.
    let a = ask("SELECT name, capacity FROM concert ORDER BY capacity DESC", "What are the names and capacities of all venues?", &[]);
    assert_eq!(a.sql, "SELECT name, capacity FROM stadium ORDER BY capacity DESC");
    assert!(switched(&a), "{:?}", a.fired);
    let aliased = ask("SELECT c.name FROM concert AS c WHERE c.capacity > 100", "Names of the big venues", &[]);
    assert_eq!(aliased.sql, "SELECT c.name FROM stadium AS c WHERE c.capacity > 100");
    // Two tables have the name: the linked one, else none.
    assert!(!switched(&ask("SELECT name FROM concert", "names of the venues", &[])));
    let linked = vec!["stadium".to_string()];
    assert_eq!(ask("SELECT name FROM concert", "names of the venues", &linked).sql, "SELECT name FROM stadium");
    // Left alone: the question names the written table (its rows are meant: the key's join
    // serves it); every column is there; a join; a subquery names the table; no question.
    assert!(!switched(&ask("SELECT name, capacity FROM concert", "the venue name and capacity of each concert", &[])));
    assert!(!switched(&ask("SELECT concert_name, year FROM concert", "names and years of the shows", &[])));
    assert!(!switched(&ask("SELECT name, capacity FROM concert JOIN singer_in_concert USING (concert_id)", "venues", &[])));
    let correlated = "SELECT name, capacity FROM concert WHERE EXISTS (SELECT 1 FROM singer_in_concert WHERE singer_in_concert.concert_id = concert.concert_id)";
    assert!(!switched(&ask(correlated, "venues with a singer", &[])));
    assert!(!switched(&ask("SELECT name, capacity FROM concert", "", &[])));
}

/// A value index whose closest value holds a backslash.
struct Backslashed;
impl ValueLookup for Backslashed {
    fn closest_value(&mut self, _table: u32, _column: &str, _literal: &str) -> Option<String> {
        Some("Fran\\' OR true --".into())
    }
}

#[test]
fn a_stored_value_holding_a_backslash_is_never_put_in() {
    // With standard_conforming_strings off, PostgreSQL would read the backslash as an escape.
    let a = align("SELECT name FROM singer WHERE country = 'france'", &star_schema(), Context::default(), &mut Backslashed, Rules::ALL);
    assert_eq!(a.sql, "SELECT name FROM singer WHERE country = 'france'");
    assert!(a.fired.iter().all(|f| !f.contains("value")), "{:?}", a.fired);
}
