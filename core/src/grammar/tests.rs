use super::check::{self, Parsed};
use super::*;

fn schema(tables: &[(&str, &str, &[&str])]) -> Schema {
    let tables: Vec<serde_json::Value> = tables
        .iter()
        .enumerate()
        .map(|(i, (name, ident, cols))| {
            serde_json::json!({
                "oid": 1000 + i, "schema": "public", "name": name, "ident": ident, "kind": "r", "comment": null,
                "columns": cols.iter().map(|c| {
                    let (n, id) = c.split_once('¦').unwrap_or((c, c));
                    serde_json::json!({"name": n, "ident": id, "data_type": "text", "comment": null})
                }).collect::<Vec<_>>()
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "tables": tables })).expect("schema")
}

fn concert() -> Schema {
    schema(&[
        ("singer", "singer", &["singer_id", "name", "country", "age"]),
        ("concert", "concert", &["concert_id", "concert_name", "year", "stadium_id"]),
        ("singer_in_concert", "singer_in_concert", &["concert_id", "singer_id"]),
        ("stadium", "stadium", &["stadium_id", "name", "capacity"]),
    ])
}

/// The columns of the first `n` tables, as a rendering lists them.
fn first(s: &Schema, n: usize) -> Vec<String> {
    s.tables.iter().take(n).flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.ident, c.ident))).collect()
}

fn parsed(s: &Schema, shown: usize, form: Form) -> Parsed {
    let g = build(s, &first(s, shown), form).expect("grammar");
    let p = check::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text));
    assert_eq!(p.undefined(), Vec::<String>::new());
    p
}

fn block(sql: &str) -> String {
    format!("```sql\n{sql}\n```")
}

#[test]
fn the_queries_of_a_question_are_allowed() {
    let p = parsed(&concert(), 4, Form::Query);
    for sql in [
        "SELECT count(*) FROM singer",
        "SELECT count(*) FROM singer WHERE singer.country = 'France'",
        "SELECT singer.name, singer.country FROM singer ORDER BY singer.age DESC LIMIT 1",
        "SELECT DISTINCT singer.country FROM singer WHERE singer.age > 20",
        "SELECT concert.concert_name, count(*) AS n FROM concert JOIN singer_in_concert ON concert.concert_id = singer_in_concert.concert_id GROUP BY concert.concert_name ORDER BY n DESC",
        "SELECT stadium.name FROM stadium WHERE stadium.stadium_id NOT IN (SELECT concert.stadium_id FROM concert)",
        "SELECT avg(singer.age), max(singer.age) FROM singer WHERE singer.country ILIKE '%fr%'",
        "SELECT singer.name FROM singer\nJOIN singer AS singer_2 ON singer.age = singer_2.age\nWHERE singer.singer_id <> singer_2.singer_id",
        "SELECT CAST(count(*) AS numeric) / NULLIF(1, 0) FROM singer",
        "SELECT round(100.0 * sum(CASE WHEN singer.country = 'France' THEN 1 ELSE 0 END) / count(*), 2) FROM singer",
        "SELECT concert.year FROM concert WHERE concert.year BETWEEN 2014 AND 2015 AND concert.concert_name IS NOT NULL",
        "WITH cte1 AS (SELECT concert.stadium_id, count(*) AS n FROM concert GROUP BY concert.stadium_id) SELECT stadium.name FROM stadium JOIN cte1 ON cte1.stadium_id = stadium.stadium_id ORDER BY cte1.n DESC LIMIT 1",
        "SELECT sub1.c FROM (SELECT singer.country AS c FROM singer) AS sub1",
        "SELECT EXTRACT(YEAR FROM CURRENT_DATE) - concert.year::integer FROM concert",
        "SELECT singer.name FROM singer WHERE singer.country = 'Côte d''Ivoire'",
        "SELECT singer.name FROM singer UNION SELECT stadium.name FROM stadium;",
    ] {
        assert!(p.accepts("root", &block(sql)), "{sql}");
    }
}

#[test]
fn names_the_tables_lack_are_not() {
    let p = parsed(&concert(), 4, Form::Query);
    for sql in [
        "SELECT singer.nme FROM singer",
        "SELECT concert.name FROM concert",
        "SELECT T1.name FROM singer AS T1",
        "SELECT count(*) FROM singers",
        "SELECT name FROM singer",
        "SELECT singer.name FROM singer AS s",
        "SELECT singer_4.name FROM singer",
        "DELETE FROM singer",
        "SELECT pg_sleep(1) FROM singer",
    ] {
        assert!(!p.accepts("root", &block(sql)), "{sql}");
    }
}

#[test]
fn every_shown_column_is_reachable_with_its_table_and_no_other() {
    let s = concert();
    let p = parsed(&s, 2, Form::Query);
    for (i, t) in s.tables.iter().enumerate() {
        for c in &t.columns {
            let sql = format!("SELECT {}.{} FROM {}", t.ident, c.ident, t.ident);
            assert_eq!(p.accepts("root", &block(&sql)), i < 2, "{sql}");
            for other in s.tables.iter().filter(|o| !o.columns.iter().any(|x| x.name == c.name)) {
                assert!(!p.accepts("colref", &format!("{}.{}", other.ident, c.ident)), "{}.{}", other.ident, c.ident);
            }
        }
    }
    assert!(p.accepts("relation", "concert AS concert_3"));
    assert!(!p.accepts("relation", "stadium"));
}

#[test]
fn quoted_schema_qualified_and_mixed_case_names_are_written_as_the_prompt_writes_them() {
    let s = schema(&[
        ("Order Items", "\"Order Items\"", &["Unit Price¦\"Unit Price\"", "qty"]),
        ("airports", "travel.airports", &["Code¦\"Code\"", "city"]),
        ("user", "\"user\"", &["id"]),
    ]);
    let p = parsed(&s, 3, Form::Query);
    assert!(p.accepts("root", &block("SELECT \"Order Items\".\"Unit Price\" FROM \"Order Items\" WHERE \"Order Items\".qty > 2")));
    assert!(p.accepts("root", &block("SELECT travel.airports.\"Code\" FROM travel.airports")));
    assert!(p.accepts("root", &block("SELECT \"user\".id FROM \"user\" JOIN \"user\" AS user_2 ON \"user\".id = user_2.id")));
    assert!(p.accepts("relation", "\"Order Items\" AS \"Order Items_2\""));
    assert!(!p.accepts("colref", "\"Order Items\".\"unit price\""));
    assert!(!p.accepts("colref", "travel.airports.code"));
}

#[test]
fn hostile_names_stay_inside_their_literals() {
    // Names built to close a GBNF literal, start a rule, open a class or a comment, or break the line.
    let hostile = [
        "x\" | [^\"]* | \"y",
        "a\\\"b",
        "new\nline ::= [^x]*",
        "]) | sql | ([",
        "# comment",
        "zwj\u{200D}\u{202E}rtl",
        "emoji😀",
    ];
    let tables: Vec<(String, String, Vec<String>)> = hostile
        .iter()
        .map(|h| (h.to_string(), format!("\"{}\"", h.replace('"', "\"\"")), vec![format!("{h}¦\"{}\"", h.replace('"', "\"\""))]))
        .collect();
    let specs: Vec<(&str, &str, Vec<&str>)> = tables.iter().map(|(n, i, c)| (n.as_str(), i.as_str(), c.iter().map(String::as_str).collect())).collect();
    let specs: Vec<(&str, &str, &[&str])> = specs.iter().map(|(n, i, c)| (*n, *i, c.as_slice())).collect();
    let s = schema(&specs);
    let g = build(&s, &first(&s, s.tables.len()), Form::Query).expect("grammar");
    // one line per rule: the fixed ones, root, a rule per table, relation and colref
    let fixed = SQL.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).count();
    assert_eq!(g.text.lines().count(), fixed + 1 + s.tables.len() + 2, "{}", g.text);
    assert!(g.text.is_ascii(), "{}", g.text);
    let p = check::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text));
    assert_eq!(p.undefined(), Vec::<String>::new());
    for t in &s.tables {
        let shown = crate::render::ident(&t.ident);
        let col = crate::render::ident(&t.columns[0].ident);
        assert!(p.accepts("relation", &shown), "{shown}");
        assert!(p.accepts("root", &block(&format!("SELECT {shown}.{col} FROM {shown}"))), "{shown}");
        assert!(!p.accepts("relation", &t.name), "{}", t.name);
    }
    // the fixed rules are still what they were: no name changed the language of another rule
    assert!(!p.accepts("relation", "y"));
    assert!(!p.accepts("sql", "SELECT 1 FROM x"));
    assert!(p.accepts("cmp-op", "<="));
}

#[test]
fn the_structured_chain_of_thought_lists_columns_the_tables_have() {
    let p = parsed(&concert(), 4, Form::Thought);
    let ok = "#reason: count French singers\n#columns: singer.country, singer.singer_id\n#values: singer.country = 'France'\n#SELECT: count\n#SQL-like: count singers where country is France\n#SQL: ```sql\nSELECT count(*) FROM singer WHERE singer.country = 'France'\n```";
    assert!(p.accepts("root", ok));
    assert!(!p.accepts("root", &ok.replace("singer.singer_id", "singer.id")));
}

#[test]
fn a_wide_schema_stays_within_the_bound_and_factors_its_names() {
    let names: Vec<(String, Vec<String>)> =
        (0..1000).map(|i| (format!("table_{i:04}"), (0..12).map(|j| format!("column_number_{j}")).collect())).collect();
    let specs: Vec<(&str, &str, Vec<&str>)> = names.iter().map(|(n, c)| (n.as_str(), n.as_str(), c.iter().map(String::as_str).collect())).collect();
    let specs: Vec<(&str, &str, &[&str])> = specs.iter().map(|(n, i, c)| (*n, *i, c.as_slice())).collect();
    let s = schema(&specs);
    let g = build(&s, &first(&s, 1000), Form::Query).expect("within the bound");
    assert!(g.text.len() <= MAX_BYTES && g.relations == 1000 && g.columns == 12_000, "{}", g.text.len());
    // the table names share "table_0": the relation rule writes it once
    let relation = g.text.lines().find(|l| l.starts_with("relation ::= ")).expect("relation rule");
    assert!(relation.starts_with("relation ::= \"table_0\" ("), "{}", &relation[..80]);
    let p = check::parse(&g.text).expect("parses");
    assert!(p.accepts("colref", "table_0999.column_number_11"));
    assert!(p.accepts("colref", "table_0007_3.column_number_0"));
    assert!(!p.accepts("colref", "table_1000.column_number_0"));
}

#[test]
fn no_relation_no_grammar() {
    assert_eq!(build(&Schema::default(), &["singer.name".into()], Form::Query), Err(NoGrammar::NoRelations));
    let s = concert();
    assert_eq!(build(&s, &[], Form::Query), Err(NoGrammar::NoRelations));
    // a column the rendering did not show is not in the grammar, nor its table when it shows none
    let g = build(&s, &["singer.name".into(), "stadium.nope".into()], Form::Query).expect("grammar");
    assert_eq!((g.relations, g.columns), (1, 1));
    let p = check::parse(&g.text).expect("parses");
    assert!(p.accepts("colref", "singer.name") && !p.accepts("colref", "singer.age") && !p.accepts("relation", "stadium"));
}

#[test]
fn literals_escape_what_is_not_printable_ascii() {
    assert_eq!(literal("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(literal("x\ny\u{202E}😀"), "\"x\\u000Ay\\u202E\\U0001F600\"");
    assert_eq!(literal(""), "\"\"");
}

#[test]
fn radix_shares_prefixes_and_keeps_every_word() {
    let r = radix(vec![("abc".into(), String::new()), ("abd".into(), String::new()), ("b".into(), String::new()), ("ab".into(), String::new())]);
    assert_eq!(r, r#""ab" ("" | "c" | "d") | "b""#);
}


#[test]
fn a_long_names_second_and_third_use_stay_two_names() {
    let long = "a".repeat(63);
    assert_eq!(alias(&long, 2), format!("{}_2", "a".repeat(61)));
    assert_ne!(alias(&long, 2), alias(&long, 3));
    // cut at a character boundary
    let wide = "é".repeat(31);
    assert!(alias(&wide, 2).len() <= 63 + 2, "{}", alias(&wide, 2));
}
