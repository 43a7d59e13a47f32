use super::*;

pub fn sample_schema() -> Schema {
    serde_json::from_str(
        r#"{
      "tables": [
        {"oid": 1, "schema": "public", "name": "singer", "ident": "singer", "kind": "r", "comment": "People who sing",
         "columns": [
           {"name": "singer_id", "ident": "singer_id", "data_type": "integer", "category": "N", "comment": null, "not_null": true,
            "stats": {"values": ["1","2","3","4","5","6"], "distinct": 6, "complete": true, "min": "1", "max": "6"}},
           {"name": "name", "ident": "name", "data_type": "text", "category": "S", "comment": null,
            "stats": {"values": ["Joe Sharp","John Nizinik","Justin Brown","Rose White","Timbaland","Tribal King"], "distinct": 6, "complete": true}},
           {"name": "country", "ident": "country", "data_type": "text", "category": "S", "comment": "Country of birth",
            "stats": {"values": ["France","Netherlands","United States"], "distinct": 3, "complete": true}},
           {"name": "is_male", "ident": "is_male", "data_type": "boolean", "category": "B", "comment": null,
            "stats": {"values": ["f","t"], "distinct": 2, "complete": true}}
         ],
         "primary_key": ["singer_id"]},
        {"oid": 2, "schema": "public", "name": "Order Items", "ident": "\"Order Items\"", "kind": "r", "comment": null,
         "columns": [
           {"name": "singer_id", "ident": "singer_id", "data_type": "integer", "category": "N", "comment": null},
           {"name": "select", "ident": "\"select\"", "data_type": "text", "category": "S", "comment": null,
            "stats": {"values": ["it's"], "distinct": 1, "complete": true}}
         ],
         "primary_key": []}
      ],
      "foreign_keys": [{"table": "\"Order Items\"", "columns": ["singer_id"], "ref_table": "singer", "ref_columns": ["singer_id"]}]
    }"#,
    )
    .expect("valid sample schema")
}

#[test]
fn renders_open_sql_format() {
    let r = sample_schema().render(10_000);
    assert_eq!(r.detail, Detail::Full);
    let expected = "\
# singer ( -- People who sing
#   singer_id: integer, range [1, 6], PRIMARY_KEY
#   name: text, e.g. ('Joe Sharp', 'John Nizinik', 'Justin Brown')
#   country: text, (Country of birth), VALUES ('France', 'Netherlands', 'United States')
#   is_male: boolean, VALUES (false, true)
# )
# \"Order Items\" (
#   singer_id: integer
#   \"select\": text, VALUES ('it''s')
# )
# FOREIGN KEYS:
# \"Order Items\".singer_id = singer.singer_id
";
    assert_eq!(r.text, expected);
}

#[test]
fn renders_create_table_statements() {
    let r = sample_schema().render_ddl(10_000);
    let expected = "\
CREATE TABLE singer (
  singer_id integer PRIMARY KEY,
  name text,
  country text,
  is_male boolean
);
CREATE TABLE \"Order Items\" (
  singer_id integer REFERENCES singer (singer_id),
  \"select\" text
);
";
    assert_eq!(r.text, expected);
    let tiny = sample_schema().render_ddl(10);
    assert_eq!(tiny.tables_shown, 1);
    assert!(tiny.text.ends_with("-- ... 1 more tables not shown (schema larger than the prompt budget)\n"), "{}", tiny.text);
}

#[test]
fn budget_drops_detail_then_tables() {
    let s = sample_schema();
    let full = s.render(10_000);
    let core = s.render(full.tokens - 1);
    assert!(core.detail < Detail::Full && core.tables_omitted == 0);
    // Names only (Open-SQL's shortest form) keeps every table where types no longer fit.
    let names = s.render_tables(&s.tables, Detail::Names, 0);
    let short = s.render(estimate_tokens(&names));
    assert_eq!((short.detail, short.tables_omitted), (Detail::Names, 0));
    assert!(short.text.starts_with("# singer(singer_id, name, country, is_male)\n"), "{}", short.text);
    let tiny = s.render(10);
    assert_eq!(tiny.detail, Detail::Names);
    assert_eq!(tiny.tables_shown, 1);
    assert!(tiny.text.contains("1 more tables not shown"));
    // A foreign key to a table not shown is not rendered.
    assert!(!tiny.text.contains("FOREIGN KEYS"));
}

#[test]
fn tables_within_budget() {
    let s = sample_schema();
    assert_eq!(s.tables_within(10_000), 2);
    assert_eq!(s.tables_within(1), 1);
    let bare = s.render(10);
    assert!(s.tables_within(10) >= bare.tables_shown);
}

/// The star schema in schema `music`, and a second `singer` in schema `pop` (index 4):
/// neither on the search path.
pub fn two_schemas() -> Schema {
    let mut s = star_schema();
    for t in s.tables.iter_mut() {
        t.schema = "music".into();
        t.ident = format!("music.{}", t.name);
        t.owner_trusted = true;
    }
    for fk in s.foreign_keys.iter_mut() {
        fk.table = format!("music.{}", fk.table);
        fk.ref_table = format!("music.{}", fk.ref_table);
    }
    let mut pop = s.tables[1].clone();
    pop.oid = 9;
    pop.schema = "pop".into();
    pop.ident = "pop.singer".into();
    s.tables.push(pop);
    s
}

/// concert_singer's shape: singer_in_concert joins singer and concert, concert has a stadium.
/// A table of the public schema as a schema's JSON holds it: text columns, a primary key.
pub fn table_json(oid: u32, name: &str, cols: &[&str], pk: &[&str]) -> serde_json::Value {
    serde_json::json!({"oid": oid, "schema": "public", "name": name, "ident": name, "kind": "r", "comment": null,
        "columns": cols.iter().map(|c| serde_json::json!({"name": c, "ident": c, "data_type": "text", "comment": null})).collect::<Vec<_>>(),
        "primary_key": pk})
}

pub fn star_schema() -> Schema {
    let t = table_json;
    serde_json::from_value(serde_json::json!({
        "tables": [
            t(1, "concert", &["concert_id", "concert_name", "stadium_id", "year"], &["concert_id"]),
            t(2, "singer", &["singer_id", "name", "country", "age"], &["singer_id"]),
            t(3, "singer_in_concert", &["concert_id", "singer_id"], &["concert_id", "singer_id"]),
            t(4, "stadium", &["stadium_id", "name", "capacity"], &["stadium_id"]),
        ],
        "foreign_keys": [
            {"table": "concert", "columns": ["stadium_id"], "ref_table": "stadium", "ref_columns": ["stadium_id"], "enforced": true},
            {"table": "singer_in_concert", "columns": ["concert_id"], "ref_table": "concert", "ref_columns": ["concert_id"], "enforced": true},
            {"table": "singer_in_concert", "columns": ["singer_id"], "ref_table": "singer", "ref_columns": ["singer_id"], "enforced": true}
        ]
    }))
    .expect("valid star schema")
}

fn cols(s: &Schema) -> Vec<String> {
    s.tables.iter().flat_map(|t| t.columns.iter().map(move |c| format!("{}.{}", t.ident, c.ident))).collect()
}

#[test]
fn focus_adds_keys_and_the_join_path() {
    let s = star_schema();
    // singer.name and stadium.capacity: the path goes through singer_in_concert and concert.
    let f = s.focus(&[(1, 1), (3, 2)]);
    assert_eq!(f.path_tables, vec!["concert", "singer_in_concert"]);
    assert_eq!(
        cols(&f.schema),
        vec![
            "concert.concert_id", "concert.stadium_id",
            "singer.singer_id", "singer.name",
            "singer_in_concert.concert_id", "singer_in_concert.singer_id",
            "stadium.stadium_id", "stadium.name", "stadium.capacity",
        ]
    );
    // stadium.name shares its name with the chosen singer.name.
    assert!(f.added_columns.contains(&"stadium.name".to_string()));
    assert_eq!(f.schema.foreign_keys.len(), 3);
}

#[test]
fn units_are_schemas_and_tables_a_foreign_key_links() {
    assert_eq!(star_schema().units(), vec![0, 0, 0, 0]);
    // pop.singer is a schema of its own.
    assert_eq!(two_schemas().units(), vec![0, 0, 0, 0, 4]);
    // A foreign key across schemas makes them one unit.
    let mut s = two_schemas();
    s.foreign_keys.push(serde_json::from_value(serde_json::json!(
        {"table": "pop.singer", "columns": ["singer_id"], "ref_table": "music.singer", "ref_columns": ["singer_id"]})).expect("fk"));
    assert_eq!(s.units(), vec![0, 0, 0, 0, 0]);
}

#[test]
fn focus_on_one_table_keeps_it_small() {
    let f = star_schema().focus(&[(1, 2)]);
    assert_eq!(cols(&f.schema), vec!["singer.singer_id", "singer.country"]);
    assert!(f.schema.foreign_keys.is_empty());
    assert_eq!(star_schema().focus(&[]).schema.tables.len(), 4);
}

#[test]
fn numbers_are_rarely_categorical() {
    let s = sample_schema();
    assert!(categorical_values(&s.tables[0].columns[0]).is_none());
    assert_eq!(categorical_values(&s.tables[0].columns[3]).map(|v| v.len()), Some(2));
}

#[test]
fn token_estimate_is_monotonic() {
    assert_eq!(estimate_tokens(""), 0);
    assert!(estimate_tokens("SELECT count(*) FROM singer") >= 7);
    // ASCII at 3.2 characters a token, as before.
    assert_eq!(estimate_tokens(&"a".repeat(32)), 10);
    // Beyond ASCII, at least a token a character: a name of rare four-byte letters (63 bytes,
    // 15 of them and a digit) is not a fifth of its cost.
    let name = format!("{}1", "\u{1D504}".repeat(15));
    assert!(estimate_tokens(&name) >= 31, "{}", estimate_tokens(&name));
    assert_eq!(estimate_tokens("é"), 1);
    assert_eq!(estimate_tokens("日本"), 2);
    assert!(estimate_tokens(&"\u{1D504}".repeat(1000)) >= 1000);
}

#[test]
fn wide_schemas_of_names_beyond_ascii_keep_the_budget() {
    // 2,000 tables named with fifteen four-byte letters each: every layout and the agent's
    // table list are priced as estimate_tokens() prices them, so each stays within its budget.
    let tables: Vec<serde_json::Value> = (0..2000)
        .map(|i| {
            let name = format!("{}{i}", "\u{1D504}".repeat(15));
            let mut t = table_json(i + 1, &name, &["id"], &["id"]);
            t["ident"] = serde_json::json!(format!("\"{name}\""));
            t
        })
        .collect();
    let s: Schema = serde_json::from_value(serde_json::json!({ "tables": tables })).expect("valid schema");
    for max in [300, 3000] {
        let r = s.render(max);
        assert!(r.tokens <= max && estimate_tokens(&r.text) <= max, "render({max}): {} tokens", estimate_tokens(&r.text));
        assert!(r.tables_shown < 2000);
        let linking = Linking { rank: vec![5, 7], ..Default::default() };
        let r = s.render_linked(max, &linking);
        assert!(estimate_tokens(&r.text) <= max, "render_linked({max}): {} tokens", estimate_tokens(&r.text));
        let (list, omitted) = crate::pipeline::agent::table_list(&s, max);
        // The names within the budget; the note of how many more follows them.
        let names = list.split(" (and ").next().unwrap_or_default();
        assert!(estimate_tokens(&format!("### Tables: {names}")) <= max && omitted > 0, "table_list({max}): {list}");
    }
}
