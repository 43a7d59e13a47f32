//! The join on a foreign key that one side's missing column stands for.

use crate::align::{align, Context, NoValues, Rules};
use crate::schema::tests::table_json;
use crate::schema::Schema;

/// car_names(makeid, model) and cars_data(id, weight), cars_data.id -> car_names.makeid; flights
/// with two keys to airports.
fn cars() -> Schema {
    let t = table_json;
    serde_json::from_value(serde_json::json!({
        "tables": [
            t(1, "car_names", &["makeid", "model"], &["makeid"]),
            t(2, "cars_data", &["id", "weight"], &["id"]),
            t(3, "airports", &["code", "city"], &["code"]),
            t(4, "flights", &["flight_no", "source_airport", "dest_airport"], &["flight_no"]),
            t(5, "car_parts", &["part_id", "makeid"], &["part_id"]),
        ],
        "foreign_keys": [
            {"table": "cars_data", "columns": ["id"], "ref_table": "car_names", "ref_columns": ["makeid"]},
            {"table": "flights", "columns": ["source_airport"], "ref_table": "airports", "ref_columns": ["code"]},
            {"table": "flights", "columns": ["dest_airport"], "ref_table": "airports", "ref_columns": ["code"]}
        ]
    }))
    .expect("valid schema")
}

#[test]
fn a_key_equated_to_a_column_the_other_table_lacks_joins_on_their_foreign_key() {
    let s = cars();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules::ALL);
    // The key's name written on both sides: cars_data has no makeid; its id is the key to it.
    let a = fix("SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid WHERE d.weight > 3000");
    assert_eq!(a.sql, "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid WHERE d.weight > 3000");
    assert!(a.fired.contains(&"agent: cars_data joined to car_names on their foreign key (d.id = n.makeid)".to_string()), "{:?}", a.fired);
    // Either side may lack it, and either table may come first.
    assert_eq!(
        fix("SELECT n.model FROM car_names AS n JOIN cars_data AS d ON n.makeid = d.makeid").sql,
        "SELECT n.model FROM car_names AS n JOIN cars_data AS d ON n.makeid = d.id"
    );
    assert_eq!(
        fix("SELECT car_names.model FROM car_names JOIN cars_data ON cars_data.car_names_id = car_names.makeid").sql,
        "SELECT car_names.model FROM car_names JOIN cars_data ON cars_data.id = car_names.makeid"
    );
    // An outer join keeps its kind: only its condition is made the key's two ends.
    for kind in ["LEFT JOIN", "LEFT OUTER JOIN", "RIGHT JOIN", "FULL JOIN"] {
        assert_eq!(
            fix(&format!("SELECT n.model FROM cars_data AS d {kind} car_names AS n ON d.makeid = n.makeid")).sql,
            format!("SELECT n.model FROM cars_data AS d {kind} car_names AS n ON d.id = n.makeid")
        );
    }
    // Left alone: the right join already; the present column no key (model); a key with two
    // foreign keys to the lacking table (which one is meant is not known); a condition with
    // more than the equality.
    for sql in [
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid",
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.model = n.model",
        "SELECT a.city FROM flights AS f JOIN airports AS a ON f.code = a.code",
        "SELECT a.city FROM flights AS f LEFT JOIN airports AS a ON f.code = a.code",
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid AND d.weight > 1",
        // Another table of the FROM has the missing column: the qualifier may be what is wrong.
        "SELECT n.model FROM car_names AS n JOIN car_parts AS p ON p.makeid = n.makeid JOIN cars_data AS d ON d.makeid = n.makeid",
        // ... or may have it: a subquery's or a CTE's columns are not the catalog's to say.
        "SELECT n.model FROM (SELECT makeid FROM car_parts) AS p JOIN car_names AS n ON p.makeid = n.makeid JOIN cars_data AS d ON d.makeid = n.makeid",
        "WITH p AS (SELECT makeid FROM car_parts) SELECT n.model FROM p JOIN car_names AS n ON p.makeid = n.makeid JOIN cars_data AS d ON d.makeid = n.makeid",
        // An alias a subquery uses for another table: read from this FROM (car_parts has the
        // column, so nothing is missing here).
        "SELECT t2.model FROM car_parts AS t1 JOIN car_names AS t2 ON t1.makeid = t2.makeid WHERE t2.makeid IN (SELECT t1.id FROM cars_data AS t1 WHERE t1.weight > 3000)",
    ] {
        let out = fix(sql);
        assert!(!out.fired.iter().any(|f| f.contains("joined") || f.contains("join now reads")), "{sql}: {:?}", out.fired);
        assert_eq!(out.sql.matches(".id").count(), sql.matches(".id").count(), "{sql}: {}", out.sql);
    }
}

#[test]
fn a_chain_of_inner_joins_whose_next_table_has_the_column_is_put_in_order() {
    let s = crate::schema::tests::star_schema();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    // singer_in_concert lacks stadium_id; concert, joined next, has it, a key to the stadium's.
    let a = fix("SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id \
                 JOIN concert AS c ON sic.concert_id = c.concert_id WHERE c.year >= 2014");
    assert_eq!(
        a.sql,
        "SELECT s.name FROM stadium AS s JOIN concert AS c ON s.stadium_id = c.stadium_id \
         JOIN singer_in_concert AS sic ON sic.concert_id = c.concert_id WHERE c.year >= 2014"
    );
    assert_eq!(a.fired, vec!["agent: concert joined before singer_in_concert, which lacks stadium_id".to_string()]);
    // Either side of the equality, tables without aliases.
    let b = fix("SELECT stadium.name FROM stadium JOIN singer_in_concert ON singer_in_concert.stadium_id = stadium.stadium_id \
                 JOIN concert ON concert.concert_id = singer_in_concert.concert_id");
    assert_eq!(
        b.sql,
        "SELECT stadium.name FROM stadium JOIN concert ON concert.stadium_id = stadium.stadium_id \
         JOIN singer_in_concert ON concert.concert_id = singer_in_concert.concert_id"
    );
    // Left alone: an outer join either way (the order changes the rows); the next table lacks
    // it too; no key links the two columns; the joined table has it (nothing missing); a
    // condition with more than the equality; the next item is not a table.
    for sql in [
        "SELECT s.name FROM stadium AS s LEFT JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN concert AS c ON sic.concert_id = c.concert_id",
        "SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id LEFT JOIN concert AS c ON sic.concert_id = c.concert_id",
        "SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN singer AS x ON sic.singer_id = x.singer_id",
        "SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.capacity = sic.year JOIN concert AS c ON sic.concert_id = c.concert_id",
        "SELECT s.name FROM stadium AS s JOIN concert AS c ON s.stadium_id = c.stadium_id JOIN singer_in_concert AS sic ON sic.concert_id = c.concert_id",
        "SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id AND s.capacity > 1 JOIN concert AS c ON sic.concert_id = c.concert_id",
        "SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN (SELECT * FROM concert) AS c ON sic.concert_id = c.concert_id",
        // The next join's condition does not link it to l (l would join to nothing).
        "SELECT count(*) FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN concert AS c ON c.stadium_id = s.stadium_id",
        // A CTE named like the table.
        "WITH concert AS (SELECT 1 AS concert_id, 2 AS stadium_id) SELECT s.name FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN concert AS c ON sic.concert_id = c.concert_id",
    ] {
        let out = fix(sql);
        assert!(!out.fired.iter().any(|f| f.contains("joined before")), "{sql}: {:?} -> {}", out.fired, out.sql);
    }
    // A third table with the column: which one was meant is not known.
    let mut s2 = crate::schema::tests::star_schema();
    let stadium_id = s2.tables[0].columns[2].clone();
    assert_eq!(stadium_id.name, "stadium_id");
    s2.tables[1].columns.push(stadium_id);
    let out = align(
        "SELECT s.name FROM stadium AS s JOIN singer AS x ON x.singer_id = 1 JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN concert AS c ON sic.concert_id = c.concert_id",
        &s2,
        Context::default(),
        &mut NoValues,
        Rules { agent: true, ..Rules::NONE },
    );
    assert!(!out.fired.iter().any(|f| f.contains("joined before")), "{:?}", out.fired);
}

#[test]
fn a_join_in_a_subquery_or_a_cte_is_joined_on_its_foreign_key_with_its_own_from() {
    let s = cars();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules::ALL);
    assert_eq!(
        fix("SELECT n.model FROM car_names AS n WHERE n.makeid IN (SELECT m.makeid FROM cars_data AS d JOIN car_names AS m ON d.makeid = m.makeid WHERE d.weight > 3000)").sql,
        "SELECT n.model FROM car_names AS n WHERE n.makeid IN (SELECT m.makeid FROM cars_data AS d JOIN car_names AS m ON d.id = m.makeid WHERE d.weight > 3000)"
    );
    assert_eq!(
        fix("WITH heavy AS (SELECT m.model FROM cars_data AS d JOIN car_names AS m ON d.makeid = m.makeid WHERE d.weight > 3000) SELECT count(*) FROM heavy").sql,
        "WITH heavy AS (SELECT m.model FROM cars_data AS d JOIN car_names AS m ON d.id = m.makeid WHERE d.weight > 3000) SELECT count(*) FROM heavy"
    );
    assert_eq!(
        fix("SELECT x.model FROM (SELECT m.model FROM car_names AS m JOIN cars_data AS d ON m.makeid = d.makeid) AS x").sql,
        "SELECT x.model FROM (SELECT m.model FROM car_names AS m JOIN cars_data AS d ON m.makeid = d.id) AS x"
    );
    // Each SELECT reads its own FROM: `d` is car_parts in the subquery, which has makeid; the
    // outer join already reads the key's two ends.
    for sql in [
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid WHERE n.makeid IN (SELECT d.makeid FROM car_parts AS d JOIN car_names AS m ON d.makeid = m.makeid)",
        "SELECT n.model FROM car_names AS n WHERE EXISTS (SELECT 1 FROM car_parts AS d JOIN car_names AS m ON d.makeid = m.makeid WHERE m.makeid = n.makeid)",
    ] {
        assert_eq!(fix(sql).sql, sql);
    }
    // A set operation's branches too.
    assert_eq!(
        fix("SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid UNION SELECT model FROM car_names").sql,
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid UNION SELECT model FROM car_names"
    );
}

#[test]
fn no_table_is_added_to_a_subquery_or_a_set_operation() {
    let s = crate::schema::tests::star_schema();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    // The main query gets the bridge (a singer's id read as a concert's); a subquery, a CTE or
    // a UNION branch does not: a table added there could capture a name its enclosing query
    // means, or leave a bare name ambiguous, which no later rule repairs there.
    assert!(fix("SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id").fired.iter().any(|f| f.contains("through")));
    for sql in [
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT c.stadium_id FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id)",
        "WITH x AS (SELECT c.stadium_id FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id) SELECT count(*) FROM x",
        "SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id UNION SELECT name FROM singer",
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT c.stadium_id FROM stadium AS s JOIN singer_in_concert AS sic ON s.stadium_id = sic.stadium_id JOIN concert AS c ON sic.concert_id = c.concert_id)",
    ] {
        let out = fix(sql);
        assert_eq!(out.sql, sql, "{:?}", out.fired);
    }
}

#[test]
fn one_bridge_table_is_joined_once() {
    let s = crate::schema::tests::star_schema();
    // Both joins would go through singer_in_concert; PostgreSQL refuses a name declared twice,
    // in one chain of joins or in two items of the FROM.
    for sql in [
        "SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id JOIN singer AS t ON t.singer_id = c.concert_id",
        "SELECT s.name, t.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id, singer AS t JOIN concert AS d ON t.singer_id = d.concert_id",
    ] {
        let a = align(sql, &s, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
        assert_eq!(a.fired.iter().filter(|f| f.contains("through")).count(), 1, "{:?}", a.fired);
        assert_eq!(a.sql.matches("JOIN singer_in_concert").count(), 1, "{}", a.sql);
    }
}

#[test]
fn the_missing_column_read_elsewhere_with_the_wrong_table_follows_the_join() {
    let s = cars();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    // d.makeid in the select list and ORDER BY: cars_data has none; the join now reads d.id,
    // and so does the rest of the SELECT.
    let a = fix("SELECT DISTINCT d.makeid, n.model FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid WHERE d.weight > 3000 ORDER BY d.makeid");
    // An output column keeps its name.
    assert_eq!(a.sql, "SELECT DISTINCT d.id AS makeid, n.model FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid WHERE d.weight > 3000 ORDER BY d.id");
    assert!(a.fired.contains(&"agent: column d.makeid -> d.id (as the join now reads it)".to_string()), "{:?}", a.fired);
    // An outer join: the column stays on its side of the join (n.makeid would be the kept
    // row's, never NULL).
    assert_eq!(
        fix("SELECT n.model, count(d.makeid) FROM car_names AS n LEFT JOIN cars_data AS d ON n.makeid = d.makeid WHERE d.makeid IS NULL GROUP BY n.model").sql,
        "SELECT n.model, count(d.id) FROM car_names AS n LEFT JOIN cars_data AS d ON n.makeid = d.id WHERE d.id IS NULL GROUP BY n.model"
    );
    // In a subquery, with the subquery's own tables; an enclosing query's `d` (car_parts,
    // which has makeid) keeps its column.
    assert_eq!(
        fix("SELECT c.model FROM car_names AS c WHERE c.makeid IN (SELECT d.makeid FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid WHERE d.weight > 3000)").sql,
        "SELECT c.model FROM car_names AS c WHERE c.makeid IN (SELECT d.id AS makeid FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid WHERE d.weight > 3000)"
    );
    // A CTE's column keeps its name, which the main query reads (as `id` it would read the
    // main query's own makeid, a correlated reference).
    assert_eq!(
        fix("WITH heavy AS (SELECT d.makeid FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid WHERE d.weight > 3000) SELECT model FROM car_names WHERE makeid IN (SELECT makeid FROM heavy)").sql,
        "WITH heavy AS (SELECT d.id AS makeid FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid WHERE d.weight > 3000) SELECT model FROM car_names WHERE makeid IN (SELECT makeid FROM heavy)"
    );
    // Written in another case than in the condition: still the condition's column, never
    // moved to the other side of an outer join by the column rule first.
    assert_eq!(
        fix("SELECT n.model FROM car_names AS n LEFT JOIN cars_data AS d ON n.makeid = d.makeid WHERE D.makeid IS NULL").sql,
        "SELECT n.model FROM car_names AS n LEFT JOIN cars_data AS d ON n.makeid = d.id WHERE d.id IS NULL"
    );
    assert_eq!(
        fix("SELECT d.makeid FROM car_parts AS d WHERE d.makeid IN (SELECT n.makeid FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid)").sql,
        "SELECT d.makeid FROM car_parts AS d WHERE d.makeid IN (SELECT n.makeid FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid)"
    );
    // Left alone where the join is not repaired (a third table has makeid: which qualifier is
    // wrong is not known), so nothing follows it.
    let sql = "SELECT d.makeid FROM car_names AS n JOIN car_parts AS p ON p.makeid = n.makeid JOIN cars_data AS d ON d.makeid = n.makeid";
    let out = fix(sql);
    assert!(out.fired.is_empty(), "{:?} -> {}", out.fired, out.sql);
}

/// car_names(makeid, model), model_list(modelid, maker, model), car_makers(id, fullname):
/// model_list.maker -> car_makers.id, car_names.model -> model_list.model.
fn makers() -> Schema {
    makers_with(&[])
}

fn makers_with(extra: &[serde_json::Value]) -> Schema {
    let t = table_json;
    let mut keys = vec![
        serde_json::json!({"table": "model_list", "columns": ["maker"], "ref_table": "car_makers", "ref_columns": ["id"]}),
        serde_json::json!({"table": "car_names", "columns": ["model"], "ref_table": "model_list", "ref_columns": ["model"]}),
    ];
    keys.extend(extra.iter().cloned());
    serde_json::from_value(serde_json::json!({
        "tables": [
            t(1, "car_names", &["makeid", "model"], &["makeid"]),
            t(2, "model_list", &["modelid", "maker", "model"], &["modelid"]),
            t(3, "car_makers", &["id", "fullname"], &["id"]),
        ],
        "foreign_keys": keys
    }))
    .expect("valid schema")
}

#[test]
fn a_join_condition_written_with_the_wrong_earlier_table_reads_the_one_whose_key_it_is() {
    let s = makers();
    let fix = |sql: &str| align(sql, &s, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    // car_names has no maker; model_list, joined before, has the maker that references
    // car_makers.id.
    let a = fix("SELECT car_makers.fullname FROM car_names JOIN model_list ON car_names.model = model_list.model JOIN car_makers ON car_names.maker = car_makers.id");
    assert_eq!(a.sql, "SELECT car_makers.fullname FROM car_names JOIN model_list ON car_names.model = model_list.model JOIN car_makers ON model_list.maker = car_makers.id");
    assert_eq!(a.fired, vec!["agent: column car_names.maker -> model_list.maker (a foreign key to car_makers)".to_string()]);
    // Aliases, the sides the other way round, an outer join; the same wrong column elsewhere
    // follows.
    assert_eq!(
        fix("SELECT n.maker, c.fullname FROM car_names AS n JOIN model_list AS m ON n.model = m.model LEFT JOIN car_makers AS c ON c.id = n.maker").sql,
        "SELECT m.maker, c.fullname FROM car_names AS n JOIN model_list AS m ON n.model = m.model LEFT JOIN car_makers AS c ON c.id = m.maker"
    );
    // Left alone: the column and the joined one no foreign key's ends; the holder joined after
    // (not yet in the FROM there); two earlier items have it; the joined table lacks the column.
    for sql in [
        "SELECT 1 FROM car_names AS n JOIN model_list AS m ON n.model = m.model JOIN car_makers AS c ON n.maker = c.fullname",
        "SELECT 1 FROM car_names AS n JOIN car_makers AS c ON n.maker = c.id JOIN model_list AS m ON n.model = m.model",
        "SELECT 1 FROM car_names AS n JOIN model_list AS m ON n.model = m.model JOIN model_list AS m2 ON m2.model = m.model JOIN car_makers AS c ON n.maker = c.id",
        "SELECT 1 FROM model_list AS m JOIN car_names AS n ON m.model = n.model JOIN car_makers AS c ON m.maker = c.maker_id",
        // model_list is a CTE here, whose maker the catalog's key does not describe.
        "WITH model_list AS (SELECT 1 AS modelid, 'x' AS model, 2 AS maker) SELECT 1 FROM car_names AS n JOIN model_list AS m ON n.model = m.model JOIN car_makers AS c ON n.maker = c.id",
    ] {
        let out = fix(sql);
        assert!(!out.fired.iter().any(|f| f.contains("(a foreign key to")), "{sql}: {:?} -> {}", out.fired, out.sql);
    }
    // The lacking table with a key of its own to the joined one: two meanings, left alone.
    let s2 = makers_with(&[serde_json::json!({"table": "car_names", "columns": ["makeid"], "ref_table": "car_makers", "ref_columns": ["id"]})]);
    let sql = "SELECT 1 FROM car_names AS n JOIN model_list AS m ON n.model = m.model JOIN car_makers AS c ON n.maker = c.id";
    let out = align(sql, &s2, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    assert!(!out.fired.iter().any(|f| f.contains("(a foreign key to")), "{:?} -> {}", out.fired, out.sql);
}

#[test]
fn a_column_repaired_two_ways_is_left_alone_elsewhere() {
    let t = table_json;
    let s: Schema = serde_json::from_value(serde_json::json!({
        "tables": [
            t(1, "orders", &["order_no", "customer_id", "product_id"], &["order_no"]),
            t(2, "customers", &["id", "name"], &["id"]),
            t(3, "products", &["id", "title"], &["id"]),
        ],
        "foreign_keys": [
            {"table": "orders", "columns": ["customer_id"], "ref_table": "customers", "ref_columns": ["id"]},
            {"table": "orders", "columns": ["product_id"], "ref_table": "products", "ref_columns": ["id"]}
        ]
    }))
    .expect("valid schema");
    let out = align(
        "SELECT c.name, p.title FROM orders AS o JOIN customers AS c ON o.ref = c.id JOIN products AS p ON o.ref = p.id WHERE o.ref > 100",
        &s,
        Context::default(),
        &mut NoValues,
        Rules { agent: true, ..Rules::NONE },
    );
    // Each condition reads its own key; `o.ref` in WHERE could be either.
    assert_eq!(out.sql, "SELECT c.name, p.title FROM orders AS o JOIN customers AS c ON o.customer_id = c.id JOIN products AS p ON o.product_id = p.id WHERE o.ref > 100");
    // A parenthesised join may declare an alias again: nothing is followed there.
    let cars = cars();
    let sql = "SELECT d.makeid FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid CROSS JOIN (car_parts AS d JOIN car_names AS m ON d.makeid = m.makeid) AS j";
    let out = align(sql, &cars, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    assert!(!out.fired.iter().any(|f| f.contains("join now reads")), "{:?} -> {}", out.fired, out.sql);
}

#[test]
fn no_rule_brings_in_a_strangers_table() {
    // singer_in_concert moved to mallory's schema, off the search path: as hers (an owner the
    // caller does not trust) no rule joins through it; as a trusted owner's, as before.
    let moved = |trusted: bool| {
        let mut s = crate::schema::tests::star_schema();
        for t in s.tables.iter_mut().filter(|t| t.name == "singer_in_concert") {
            t.schema = "mallory".into();
            t.ident = "mallory.singer_in_concert".into();
            t.owner_trusted = trusted;
        }
        for fk in s.foreign_keys.iter_mut() {
            for end in [&mut fk.table, &mut fk.ref_table] {
                if end == "singer_in_concert" {
                    *end = "mallory.singer_in_concert".into();
                }
            }
        }
        s
    };
    let sql = "SELECT s.name FROM singer AS s JOIN concert AS c ON s.singer_id = c.concert_id";
    let fix = |s: &Schema| align(sql, s, Context::default(), &mut NoValues, Rules { agent: true, ..Rules::NONE });
    let hers = fix(&moved(false));
    assert_eq!(hers.sql, sql, "{:?}", hers.fired);
    let trusted = fix(&moved(true));
    assert!(trusted.sql.contains("JOIN mallory.singer_in_concert"), "{}", trusted.sql);
}
