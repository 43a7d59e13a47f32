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
    // Left alone: the right join already; the present column no key (model); a key with two
    // foreign keys to the lacking table (which one is meant is not known); an outer join; a
    // condition with more than the equality.
    for sql in [
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.id = n.makeid",
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.model = n.model",
        "SELECT a.city FROM flights AS f JOIN airports AS a ON f.code = a.code",
        "SELECT n.model FROM cars_data AS d LEFT JOIN car_names AS n ON d.makeid = n.makeid",
        "SELECT n.model FROM cars_data AS d JOIN car_names AS n ON d.makeid = n.makeid AND d.weight > 1",
        // Another table of the FROM has the missing column: the qualifier may be what is wrong.
        "SELECT n.model FROM car_names AS n JOIN car_parts AS p ON p.makeid = n.makeid JOIN cars_data AS d ON d.makeid = n.makeid",
        // An alias a subquery uses for another table: read from this FROM (model_list has the
        // column, so nothing is missing here).
        "SELECT t2.model FROM car_parts AS t1 JOIN car_names AS t2 ON t1.makeid = t2.makeid WHERE t2.makeid IN (SELECT t1.id FROM cars_data AS t1 WHERE t1.weight > 3000)",
    ] {
        let out = fix(sql);
        assert!(!out.fired.iter().any(|f| f.contains("foreign key")), "{sql}: {:?}", out.fired);
        assert_eq!(out.sql.matches(".id").count(), sql.matches(".id").count(), "{sql}: {}", out.sql);
    }
}
