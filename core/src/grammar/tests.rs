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

/// A schema of tables named as their identifiers, from owned names.
fn named(tables: &[(String, Vec<String>)]) -> Schema {
    let specs: Vec<(&str, &str, Vec<&str>)> = tables.iter().map(|(n, c)| (n.as_str(), n.as_str(), c.iter().map(String::as_str).collect())).collect();
    let specs: Vec<(&str, &str, &[&str])> = specs.iter().map(|(n, i, c)| (*n, *i, c.as_slice())).collect();
    schema(&specs)
}

/// Asserts that `p` allows each query of `sqls` (or, `allowed` false, none of them).
fn judged(p: &Parsed, sqls: &[&str], allowed: bool) {
    for sql in sqls {
        assert_eq!(p.accepts("root", &block(sql)), allowed, "{sql}");
    }
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
fn the_queries_of_a_question_are_allowed_in_the_models_own_form() {
    let p = parsed(&concert(), 4, Form::Query);
    for sql in [
        "SELECT count(*) FROM singer",
        "SELECT count(*) FROM singer WHERE country = 'France'",
        "SELECT name, country FROM singer ORDER BY age DESC LIMIT 1",
        "SELECT DISTINCT singer.country FROM singer WHERE singer.age > 20",
        "SELECT T1.concert_name, count(*) AS n FROM concert AS T1 JOIN singer_in_concert AS T2 ON T1.concert_id = T2.concert_id GROUP BY T1.concert_name ORDER BY n DESC",
        "SELECT c.concert_name FROM concert c JOIN singer_in_concert sic USING (concert_id)",
        "SELECT s.name FROM singer s, singer_in_concert x WHERE s.singer_id = x.singer_id",
        "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)",
        "SELECT AVG(age), MAX(age) FROM singer WHERE country ILIKE '%fr%'",
        "SELECT a.name FROM singer a\nJOIN singer b ON a.age = b.age\nWHERE a.singer_id <> b.singer_id",
        "SELECT CAST(count(*) AS numeric) / NULLIF(1, 0) FROM singer",
        "SELECT round(100.0 * sum(CASE WHEN country = 'France' THEN 1 ELSE 0 END) / count(*), 2) FROM singer",
        "SELECT count(*) FILTER (WHERE country = 'France') FROM singer",
        "SELECT DATE_TRUNC('month', year::date) AS m, count(*) FROM concert GROUP BY m ORDER BY m",
        "SELECT year FROM concert WHERE year BETWEEN 2014 AND 2015 AND concert_name IS NOT NULL",
        "SELECT s.name FROM stadium s JOIN concert c ON c.stadium_id = s.stadium_id GROUP BY s.name ORDER BY count(*) DESC LIMIT 1",
        "SELECT sub1.c FROM (SELECT country AS c FROM singer) AS sub1",
        "SELECT EXTRACT(YEAR FROM CURRENT_DATE) - year::integer FROM concert",
        "SELECT name FROM singer WHERE country = 'Côte d''Ivoire' AND age > 0",
        "SELECT singer.* FROM singer",
        "SELECT name FROM singer UNION SELECT name FROM stadium;",
        "SELECT s.name, unknown_salary FROM singer s WHERE s.unknown_genre = 'pop'",
    ] {
        assert!(p.accepts("root", &block(sql)), "{sql}");
    }
}

#[test]
fn names_the_tables_lack_are_not() {
    let p = parsed(&concert(), 4, Form::Query);
    for sql in [
        "SELECT nme FROM singer",
        "SELECT s.nme FROM singer s",
        "SELECT singer.singer_name FROM singer",
        "SELECT count(*) FROM singers",
        "SELECT name FROM singer AS s JOIN performers AS p ON s.singer_id = p.singer_id",
        "DELETE FROM singer",
        "SELECT pg_sleep(1) FROM singer",
        "SELECT strftime('%Y', year) FROM concert",
        "SELECT unknown_ FROM singer",
    ] {
        assert!(!p.accepts("root", &block(sql)), "{sql}");
    }
}

#[test]
fn a_qualifier_is_a_shown_relation_or_a_short_alias() {
    let p = parsed(&concert(), 4, Form::Query);
    for sql in [
        "SELECT singer_in_concert.singer_id FROM singer_in_concert",
        "SELECT sic.singer_id FROM singer_in_concert AS sic",
        "SELECT T1.name FROM singer T1",
        "SELECT stads.name FROM stadium stads",
    ] {
        assert!(p.accepts("root", &block(sql)), "{sql}");
    }
    // a longer free qualifier would carry any text before a column (the escape seen in practice)
    for sql in [
        "SELECT sales_dateBETWEEN.name FROM singer",
        "SELECT name FROM singer AS singers",
        "SELECT performer.name FROM singer AS p",
    ] {
        assert!(!p.accepts("root", &block(sql)), "{sql}");
    }
    // a relation the prompt quotes or qualifies is a qualifier as written
    let s = schema(&[("Order Items", "\"Order Items\"", &["id"]), ("airports", "travel.airports", &["code"])]);
    let p = parsed(&s, 2, Form::Query);
    assert!(p.accepts("root", &block("SELECT \"Order Items\".id, travel.airports.code FROM \"Order Items\", travel.airports")));
    // ... and by its table's name alone, as PostgreSQL reads it
    assert!(p.accepts("root", &block("SELECT airports.code FROM travel.airports")));
    assert_eq!(last_part("a.\"B.c\""), Some("\"B.c\""));
    assert_eq!(last_part("\"a.b\""), None);
}

#[test]
fn a_query_has_no_with_and_only_a_subquery_in_from_returns_free_names() {
    let p = parsed(&concert(), 4, Form::Query);
    // What a CTE returns is named by the model and cannot be checked where it is read: no WITH,
    // at the top or in a subquery (the same question is asked with joins and subqueries).
    for sql in [
        "WITH cte1 AS (SELECT country, count(*) AS singers FROM singer GROUP BY country) SELECT country, singers FROM cte1",
        "WITH cte1 AS (SELECT stadium_id FROM concert) SELECT name FROM stadium JOIN cte1 USING (stadium_id)",
        "SELECT name FROM singer WHERE singer_id IN (WITH cte1 AS (SELECT singer_id FROM singer) SELECT singer_id FROM cte1)",
        "SELECT cte1.n FROM stadium JOIN cte1 ON cte1.stadium_id = stadium.stadium_id",
        "SELECT singers FROM singer",
    ] {
        assert!(!p.accepts("root", &block(sql)), "{sql}");
    }
    // A subquery in FROM is named sub1..sub3, and its columns are read by any name after it.
    for sql in [
        "SELECT sub1.country, sub1.singers FROM (SELECT country, count(*) AS singers FROM singer GROUP BY country) AS sub1 ORDER BY sub1.singers DESC",
        "SELECT s.name, sub1.n FROM stadium s JOIN (SELECT stadium_id, count(*) AS n FROM concert GROUP BY stadium_id) sub1 ON sub1.stadium_id = s.stadium_id",
    ] {
        assert!(p.accepts("root", &block(sql)), "{sql}");
    }
    // inside it, only what the tables have
    assert!(!p.accepts("root", &block("SELECT sub1.n FROM (SELECT nme AS n FROM singer) AS sub1")));
    assert!(!p.accepts("root", &block("SELECT totals.n FROM (SELECT count(*) AS n FROM singer) AS totals")));
}

#[test]
fn nothing_fits_is_offered_unless_a_shown_column_is_named_so() {
    let g = build(&concert(), &first(&concert(), 4), Form::Query).expect("grammar");
    assert!(offers_nothing_fits(&g.text));
    let s = schema(&[("t", "t", &["id", "unknown_salary"])]);
    let g = build(&s, &first(&s, 1), Form::Query).expect("grammar");
    assert!(!offers_nothing_fits(&g.text), "{}", g.text);
    let p = check::parse(&g.text).expect("parses");
    assert!(p.accepts("colref", "unknown_salary") && !p.accepts("colref", "unknown_wage"));
    // nor in the relation's own rules
    assert!(p.accepts("root", &block("SELECT unknown_salary FROM t")) && !p.accepts("root", &block("SELECT unknown_wage FROM t")));
    // a name cannot forge the rule's end
    let s = schema(&[("t", "t", &["x\" | \"unknown_\" name¦\"x\"\" | \"\"unknown_\"\" name\""])]);
    let g = build(&s, &first(&s, 1), Form::Query).expect("grammar");
    assert!(offers_nothing_fits(&g.text) && g.text.lines().filter(|l| l.starts_with("column ::= ")).count() == 1);
}

#[test]
fn a_value_is_written_where_a_value_goes_not_as_a_select_item() {
    // A constant under an alias named like a column is the escape from a name the grammar lacks.
    let p = parsed(&concert(), 4, Form::Query);
    for sql in ["SELECT TIMESTAMP '2022-01-08' AS concert_date FROM concert", "SELECT 'France' AS country FROM singer", "SELECT NULL AS x FROM singer"] {
        assert!(!p.accepts("root", &block(sql)), "{sql}");
    }
    assert!(p.accepts("root", &block("SELECT name FROM singer WHERE country = 'France' AND age > 30")));
    assert!(p.accepts("root", &block("SELECT 100.0 * count(*) / 7 FROM singer")));
}

#[test]
fn every_shown_column_is_reachable_alone_or_qualified_and_no_other() {
    let s = concert();
    let p = parsed(&s, 2, Form::Query);
    let shown: Vec<&str> = s.tables.iter().take(2).flat_map(|t| t.columns.iter().map(|c| c.ident.as_str())).collect();
    for (i, t) in s.tables.iter().enumerate() {
        for c in &t.columns {
            let ok = shown.contains(&c.ident.as_str());
            assert_eq!(p.accepts("colref", &c.ident), ok, "{}", c.ident);
            assert_eq!(p.accepts("colref", &format!("x.{}", c.ident)), ok, "x.{}", c.ident);
            // after a relation's name only when the relation is shown (none of these is
            // short enough to be an alias)
            assert_eq!(p.accepts("colref", &format!("{}.{}", t.ident, c.ident)), ok && i < 2, "{}.{}", t.ident, c.ident);
            assert_eq!(p.accepts("relation", &t.ident), i < 2, "{}", t.ident);
        }
    }
    // stadium_id is a column of a shown table (concert); capacity is not
    assert!(p.accepts("colref", "stadium_id") && !p.accepts("colref", "capacity"));
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
    assert!(p.accepts("root", &block("SELECT oi.\"Unit Price\" FROM \"Order Items\" AS oi")));
    assert!(p.accepts("root", &block("SELECT travel.airports.\"Code\" FROM travel.airports")));
    assert!(p.accepts("root", &block("SELECT a.city FROM travel.airports a")));
    assert!(p.accepts("root", &block("SELECT u.id FROM \"user\" u JOIN \"user\" AS v ON u.id = v.id")));
    assert!(!p.accepts("colref", "\"Order Items\".\"unit price\""));
    assert!(!p.accepts("colref", "travel.airports.code"));
    assert!(!p.accepts("relation", "airports") && !p.accepts("relation", "user"));
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
    // one line per rule: the fixed ones, root, func, relation, column and qualifier,
    // top, top-core, select-core, many-relations and from, and each relation's copies
    let copies = s.tables.len() * scoped::lines_per_relation(fixed());
    // (and the aliases' rules: no shown name here is one an alias could start with)
    let aliases = super::alias::rules::<&str>(&[]).lines().count();
    assert_eq!(g.text.lines().count(), fixed().lines().count() + aliases + 10 + copies, "{}", g.text);
    assert!(g.text.is_ascii(), "{}", g.text);
    let p = check::parse(&g.text).unwrap_or_else(|e| panic!("{e}\n{}", g.text));
    assert_eq!(p.undefined(), Vec::<String>::new());
    for t in &s.tables {
        let shown = crate::render::ident(&t.ident);
        let col = crate::render::ident(&t.columns[0].ident);
        assert!(p.accepts("relation", &shown), "{shown}");
        assert!(p.accepts("root", &block(&format!("SELECT {shown}.{col} FROM {shown}"))), "{shown}");
        assert!(p.accepts("root", &block(&format!("SELECT {col} FROM {shown} AS h"))), "{shown}");
        assert!(!p.accepts("relation", &t.name), "{}", t.name);
    }
    // the fixed rules are still what they were: no name changed the language of another rule
    assert!(!p.accepts("relation", "y") && !p.accepts("column", "y") && !p.accepts("colref", "x"));
    assert!(!p.accepts("top", "SELECT 1 FROM x"));
    assert!(p.accepts("cmp-op", "<="));
}

/// car_1's shape: cars_data's id points to car_names (one key), car_names' model to model_list;
/// car_makers is pointed to twice by model_list (two keys: its columns are left out).
fn cars() -> Schema {
    let mut s = schema(&[
        ("cars_data", "cars_data", &["id", "mpg", "accelerate"]),
        ("car_names", "car_names", &["makeid", "model", "make"]),
        ("model_list", "model_list", &["modelid", "maker", "model", "designer"]),
        ("car_makers", "car_makers", &["id", "fullname"]),
    ]);
    let fk = |t: &str, c: &str, r: &str, rc: &str| {
        serde_json::from_value::<crate::schema::ForeignKey>(serde_json::json!({"table": t, "columns": [c], "ref_table": r, "ref_columns": [rc], "enforced": true})).expect("key")
    };
    s.foreign_keys = vec![
        fk("cars_data", "id", "car_names", "makeid"),
        fk("car_names", "model", "model_list", "model"),
        fk("model_list", "maker", "car_makers", "id"),
        fk("model_list", "designer", "car_makers", "id"),
    ];
    s
}

#[test]
fn a_select_reading_one_relation_reads_alone_the_columns_of_the_table_its_key_points_to() {
    let p = parsed(&cars(), 4, Form::Query);
    judged(
        &p,
        &[
        // car_names' make and model, alone, in a SELECT of cars_data: the alignment joins car_names
        "SELECT avg(accelerate) FROM cars_data WHERE make = 'amc hornet sportabout (sw)'",
        "SELECT model, mpg FROM cars_data ORDER BY mpg DESC LIMIT 1",
        "SELECT avg(mpg) FROM cars_data AS c WHERE model = 'volvo'",
        ],
        true,
    );
    judged(
        &p,
        &[
        // after a qualifier, a column is still the relation's own
        "SELECT avg(accelerate) FROM cars_data WHERE cars_data.make = 'x'",
        "SELECT avg(c.accelerate) FROM cars_data AS c WHERE c.make = 'x'",
        // not in a subquery, where the outer query's table may have the name
        "SELECT count(*) FROM cars_data WHERE id IN (SELECT makeid FROM car_names WHERE maker = 1)",
        "SELECT DISTINCT model FROM car_names WHERE model IN (SELECT model FROM cars_data WHERE mpg > 30)",
        // two steps away (model_list's maker from cars_data)
        "SELECT avg(mpg) FROM cars_data WHERE maker = 1",
        // against the key: car_names does not point to cars_data
        "SELECT model FROM car_names WHERE mpg > 30",
        // a table two keys point to: which of its rows is meant is not for the grammar to say
        "SELECT model FROM model_list WHERE fullname = 'ford'",
        ],
        false,
    );
    // a name the alignment reads as a typo of the relation's own column (maker: make), not joined
    judged(&p, &["SELECT model FROM car_names WHERE maker = 1"], false);
    // the model's slip the copies used to force: the one function starting with the name
    judged(&p, &["SELECT avg(accelerate) FROM cars_data WHERE make_date('volvo') IS NOT NULL"], true);
    // a table not shown lends no columns
    let g = build(&cars(), &first(&cars(), 1), Form::Query).expect("grammar");
    let p = check::parse(&g.text).expect("parsed");
    assert!(!p.accepts("root", &block("SELECT avg(accelerate) FROM cars_data WHERE make = 'x'")));
}

#[test]
fn a_column_the_relation_has_unshown_or_two_keys_reach_is_not_lent() {
    let mut s = schema(&[
        ("orders", "orders", &["id", "total", "customer_id", "product_id", "shipper_id", "title"]),
        ("customers", "customers", &["id", "name", "city"]),
        ("products", "products", &["id", "title", "label"]),
        ("shippers", "shippers", &["id", "label"]),
    ]);
    let fk = |c: &str, r: &str| {
        serde_json::from_value::<crate::schema::ForeignKey>(serde_json::json!({"table": "orders", "columns": [c], "ref_table": r, "ref_columns": ["id"], "enforced": true})).expect("key")
    };
    s.foreign_keys = vec![fk("customer_id", "customers"), fk("product_id", "products"), fk("shipper_id", "shippers")];
    // a table of the relation's own name in another schema lends nothing
    let mut archived = s.clone();
    let t = archived.tables.len();
    archived.tables.push(archived.tables[0].clone());
    archived.tables[t].oid = 2000;
    archived.tables[t].schema = "archive".into();
    archived.tables[t].ident = "archive.orders".into();
    archived.tables[t].owner_trusted = true;
    archived.tables[t].columns.retain(|c| c.name == "id");
    let mut on = archived.tables[1].columns[2].clone();
    (on.name, on.ident) = ("archived_on".into(), "archived_on".into());
    archived.tables[t].columns.push(on);
    archived.foreign_keys.push(fk("id", "archive.orders"));
    let g = build(&archived, &[first(&archived, 3), vec!["archive.orders.id".into(), "archive.orders.archived_on".into()]].concat(), Form::Query).expect("grammar");
    let p = check::parse(&g.text).expect("parsed");
    assert!(p.accepts("root", &block("SELECT archived_on FROM archive.orders")), "{}", g.text);
    assert!(!p.accepts("root", &block("SELECT total FROM orders WHERE archived_on = 'x'")), "{}", g.text);
    // orders' title is left out of the prompt; shippers is not shown at all
    let shown: Vec<String> = first(&s, 3).into_iter().filter(|c| c != "orders.title").collect();
    let g = build(&s, &shown, Form::Query).expect("grammar");
    let p = check::parse(&g.text).expect("parsed");
    judged(&p, &["SELECT total FROM orders WHERE city = 'Oslo'", "SELECT name, total FROM orders ORDER BY total DESC LIMIT 1"], true);
    judged(
        &p,
        &[
        // orders has a title of its own, unshown: PostgreSQL would read it, and nothing is joined
        "SELECT total FROM orders WHERE title = 'x'",
        // products' label, which the unshown shippers has too: the alignment joins neither
        "SELECT total FROM orders WHERE label = 'x'",
        ],
        false,
    );
    // Keys a DBA stored (no constraint) to a column that is not the primary key: its values may
    // repeat, so the alignment joins on none of them, and the grammar lends nothing.
    let mut stored = s.clone();
    for fk in stored.foreign_keys.iter_mut() {
        fk.enforced = false;
    }
    let g = build(&stored, &shown, Form::Query).expect("grammar");
    judged(&check::parse(&g.text).expect("parsed"), &["SELECT total FROM orders WHERE city = 'Oslo'"], false);
}

#[test]
fn a_select_reading_one_relation_reads_only_its_columns() {
    let p = parsed(&concert(), 4, Form::Query);
    // A column alone, or after the relation's own name, that the one relation read lacks.
    judged(
        &p,
        &[
        "SELECT count(DISTINCT singer_id) FROM concert",
        "SELECT name FROM concert",
        "SELECT count(*) FROM singer WHERE stadium_id = 1",
        "SELECT country, count(*) FROM singer GROUP BY singer.concert_name",
        "SELECT country FROM singer GROUP BY country HAVING max(capacity) > 1",
        "SELECT singer.capacity FROM singer",
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT singer_id FROM concert)",
        "SELECT name FROM singer UNION SELECT year FROM singer",
        // in the statement itself, whatever qualifies the column: an alias, another relation
        "SELECT s.capacity FROM singer s",
        "SELECT count(*) FROM singer WHERE yearg.year = 2014",
        "SELECT avg(age) FROM singer WHERE concert.year = 2014",
        // a keyword is no alias: a FROM that must go on to a join cannot take it for one
        "SELECT stadium_id FROM singer WHERE LEFT JOIN concert ON singer.singer_id = concert.concert_id",
        "SELECT capacity FROM concert ORDER FULL JOIN stadium ON concert.stadium_id = stadium.stadium_id",
        ],
        false,
    );
    judged(
        &p,
        &[
        "SELECT count(DISTINCT singer_id) FROM singer_in_concert",
        // two relations or more: any shown relation's columns, as before
        "SELECT count(DISTINCT singer_id) FROM concert JOIN singer_in_concert ON concert.concert_id = singer_in_concert.concert_id",
        "SELECT count(DISTINCT sic.singer_id) FROM concert c, singer_in_concert sic WHERE c.concert_id = sic.concert_id",
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE year = '2014')",
        // the outer query's columns in a correlated subquery, after its alias or its name
        "SELECT name FROM stadium s WHERE EXISTS (SELECT 1 FROM concert c WHERE c.stadium_id = s.stadium_id AND s.capacity > 10)",
        "SELECT name FROM stadium WHERE EXISTS (SELECT 1 FROM concert WHERE concert.stadium_id = stadium.stadium_id AND stadium.capacity > 10)",
        "SELECT sub1.n FROM (SELECT count(*) AS n FROM concert) AS sub1",
        "SELECT s.name FROM singer AS s WHERE s.age > 30 ORDER BY s.age DESC",
        ],
        true,
    );
    // Within a FILTER, too; and after the relation's own name or an alias, as the FROM writes it.
    assert!(!p.accepts("root", &block("SELECT count(*) FILTER (WHERE capacity > 1) FROM singer")));
    judged(&p, &["SELECT s.name FROM singer s WHERE s.age > 3", "SELECT s.name FROM singer AS s", "SELECT singer.name FROM singer"], true);
    // The copies rename references by reading rule names as lower-case words.
    for l in fixed().lines() {
        let name = l.split_once(" ::= ").map(|(n, _)| n).unwrap_or("");
        assert!(name.starts_with(|c: char| c.is_ascii_lowercase()) && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{l}");
    }
    // The rules copied per relation: where a column is read, below a SELECT, and nothing else.
    let mut copied: Vec<&str> = scoped::copied(fixed());
    copied.sort();
    assert_eq!(
        copied,
        [
            "atom", "call", "case", "cond", "count-star", "expr", "filter", "group-by", "having", "item", "item-atom", "item-expr", "item-term", "items",
            "order-item", "pred", "term", "test", "where", "window"
        ]
    );
    // Past the bound, the shared rules only: a column of any shown relation.
    let many: Vec<(String, Vec<String>)> = (0..=scoped::MAX_SCOPED).map(|i| (format!("t{i}"), vec![format!("c{i}")])).collect();
    let s = named(&many);
    let p = parsed(&s, s.tables.len(), Form::Query);
    assert!(p.accepts("root", &block("SELECT c1 FROM t0")));
    let s = named(&many[..scoped::MAX_SCOPED]);
    let p = parsed(&s, s.tables.len(), Form::Query);
    assert!(!p.accepts("root", &block("SELECT c1 FROM t0")) && p.accepts("root", &block("SELECT c0 FROM t0")));
    assert_eq!(build(&s, &first(&s, s.tables.len()), Form::Query).expect("grammar").scoped, scoped::MAX_SCOPED);
}

#[test]
fn copies_past_the_size_bound_give_way_to_the_shared_rules() {
    // 16 relations sharing 400 long column names: the shared rules fit, 16 copies would not.
    // (their common part at the end, where the radix tree cannot share it)
    let columns: Vec<String> = (0..400).map(|j| format!("c{j:04}_of_a_rather_long_column_name_that_ends_alike")).collect();
    let mut tables: Vec<(String, Vec<String>)> = (0..scoped::MAX_SCOPED).map(|i| (format!("t{i}"), columns.clone())).collect();
    tables[1].1.push("only_t1".into());
    let s = named(&tables);
    let g = build(&s, &first(&s, s.tables.len()), Form::Query).expect("within the bound");
    assert!(g.text.len() <= MAX_BYTES && g.scoped == 0, "{} {}", g.text.len(), g.scoped);
    let p = check::parse(&g.text).expect("parses");
    assert_eq!(p.undefined(), Vec::<String>::new());
    assert!(p.accepts("root", &block("SELECT only_t1 FROM t0")) && !p.accepts("root", &block("SELECT only_t2 FROM t0")));
}

#[test]
fn the_structured_chain_of_thought_lists_columns_the_tables_have() {
    let p = parsed(&concert(), 4, Form::Thought);
    let ok = "#reason: count French singers\n#columns: singer.country, singer_id\n#values: singer.country = 'France'\n#SELECT: count\n#SQL-like: count singers where country is France\n#SQL: ```sql\nSELECT count(*) FROM singer WHERE country = 'France'\n```";
    assert!(p.accepts("root", ok));
    assert!(!p.accepts("root", &ok.replace("singer_id", "id")));
}

#[test]
fn a_wide_schema_stays_within_the_bound_and_factors_its_names() {
    let names: Vec<(String, Vec<String>)> =
        (0..1000).map(|i| (format!("table_{i:04}"), (0..12).map(|j| format!("column_number_{j}")).collect())).collect();
    let s = named(&names);
    let g = build(&s, &first(&s, 1000), Form::Query).expect("within the bound");
    assert!(g.text.len() <= MAX_BYTES && g.relations == 1000 && g.columns == 12, "{}", g.text.len());
    // the table names share "table_0": the relation rule writes it once
    let relation = g.text.lines().find(|l| l.starts_with("relation ::= ")).expect("relation rule");
    assert!(relation.starts_with("relation ::= \"table_0\" ("), "{}", &relation[..80]);
    let p = check::parse(&g.text).expect("parses");
    assert!(p.accepts("colref", "table_0999.column_number_11") && p.accepts("relation", "table_0999"));
    assert!(!p.accepts("relation", "table_1000") && !p.accepts("colref", "column_number_12"));
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
    assert!(!p.accepts("colref", "nope"));
}

#[test]
fn literals_escape_what_is_not_printable_ascii() {
    assert_eq!(literal("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(literal("x\ny\u{202E}😀"), "\"x\\u000Ay\\u202E\\U0001F600\"");
    assert_eq!(literal(""), "\"\"");
}

#[test]
fn radix_shares_prefixes_and_keeps_every_word() {
    let r = radix(["abc", "abd", "b", "ab", "b"]);
    assert_eq!(r, r#""ab" ("" | "c" | "d") | "b""#);
}

