//! The joins for a column one key away.

use crate::align::{align, Context, Rules};
use crate::schema::tests::star_schema;

use crate::align::NoValues as Nothing;

fn run(sql: &str) -> crate::align::Aligned {
    align(sql, &star_schema(), Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE })
}

/// Whether a join for a column one key away fired.
fn joined(a: &crate::align::Aligned) -> bool {
    a.fired.iter().any(|f| f.contains("joined on"))
}

#[test]
fn a_column_one_key_away_is_read_from_the_table_the_key_points_to() {
    // capacity is the stadium's; concert.stadium_id points there.
    let a = run("SELECT s.name, c.capacity FROM singer AS s JOIN singer_in_concert AS sc ON s.singer_id = sc.singer_id \
                 JOIN concert AS c ON sc.concert_id = c.concert_id WHERE c.capacity > 100 ORDER BY c.capacity");
    assert_eq!(
        a.sql,
        "SELECT s.name, stadium.capacity FROM singer AS s JOIN singer_in_concert AS sc ON s.singer_id = sc.singer_id \
         JOIN concert AS c ON sc.concert_id = c.concert_id LEFT JOIN stadium ON c.stadium_id = stadium.stadium_id \
         WHERE stadium.capacity > 100 ORDER BY stadium.capacity"
    );
    assert_eq!(a.fired, vec!["agent: stadium joined on c.stadium_id for c.capacity".to_string()]);
    // In a subquery, with the subquery's own table.
    let b = run("SELECT name FROM singer WHERE singer_id IN (SELECT sc.singer_id FROM singer_in_concert AS sc \
                 JOIN singer AS x ON x.singer_id = sc.singer_id WHERE sc.year = 2014)");
    assert!(b.sql.contains("LEFT JOIN concert ON sc.concert_id = concert.concert_id WHERE concert.year = 2014"), "{}", b.sql);
}

#[test]
fn left_alone_where_the_column_is_not_one_key_away() {
    let unchanged = [
        // The table has it.
        "SELECT c.year FROM concert AS c JOIN stadium AS st ON c.stadium_id = st.stadium_id",
        // Another table of the SELECT has it: requalifying is another rule's, not a join.
        "SELECT c.capacity FROM concert AS c JOIN stadium AS st ON c.stadium_id = st.stadium_id",
        // The table that has it points here (one to many): not joined.
        "SELECT st.year FROM stadium AS st JOIN singer AS s ON s.singer_id = 1",
        // Used in a join's ON: the new table would come after it.
        "SELECT s.name FROM singer AS s JOIN concert AS c ON c.capacity = 1",
        // The qualifier is the enclosing query's.
        "SELECT c.concert_name FROM concert AS c WHERE EXISTS (SELECT 1 FROM singer AS s WHERE c.capacity > s.age)",
        // The parent's name is taken by another table's alias, or by a CTE.
        "SELECT c.capacity FROM concert AS c JOIN singer AS stadium ON stadium.singer_id = 1",
        "WITH stadium AS (SELECT 1 AS stadium_id) SELECT c.capacity FROM concert AS c JOIN singer AS s ON s.singer_id = 1",
        // A CTE named like the table: its columns are its own.
        "WITH concert AS (SELECT 1 AS stadium_id, 2 AS capacity) SELECT concert.capacity FROM concert JOIN singer AS s ON true",
        // Renamed columns, and a `*` list.
        "SELECT c.capacity FROM concert AS c(a, b, s, y) JOIN singer AS s ON true",
        "SELECT *, c.capacity FROM concert AS c JOIN singer AS s ON true",
        // An unqualified name the joined table has (stadium.name) would be captured from
        // the enclosing query.
        "SELECT s.name FROM singer AS s WHERE EXISTS (SELECT 1 FROM concert AS c JOIN singer_in_concert AS x ON true WHERE c.capacity > 1000 AND c.concert_name = name)",
    ];
    for sql in unchanged {
        let a = run(sql);
        assert!(!joined(&a), "{sql}: {:?} -> {}", a.fired, a.sql);
    }
}

#[test]
fn a_column_put_on_the_wrong_table_is_read_one_key_from_another() {
    // singer has no key at all; concert, also read, points to stadium, which has capacity.
    let a = run("SELECT s.name, s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
                 JOIN concert AS c ON x.concert_id = c.concert_id ORDER BY s.capacity");
    assert_eq!(
        a.sql,
        "SELECT s.name, stadium.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
         JOIN concert AS c ON x.concert_id = c.concert_id LEFT JOIN stadium ON c.stadium_id = stadium.stadium_id \
         ORDER BY stadium.capacity"
    );
    assert_eq!(a.fired, vec!["agent: stadium joined on c.stadium_id for s.capacity".to_string()]);
    // Two columns on two tables that lack them, one key: one join.
    let b = run("SELECT s.capacity, x.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
                 JOIN concert AS c ON x.concert_id = c.concert_id");
    assert_eq!(b.fired.len(), 1, "{:?}", b.fired);
    assert!(b.sql.starts_with("SELECT stadium.capacity, stadium.capacity FROM"), "{}", b.sql);
    // A derived table beside them does not stop it; the derived table's own name is not taken.
    let c = run("SELECT s.capacity, d.n FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
                 JOIN concert AS c ON x.concert_id = c.concert_id JOIN (SELECT count(*) AS n FROM singer) AS d ON true");
    assert!(c.sql.contains("LEFT JOIN stadium ON c.stadium_id = stadium.stadium_id"), "{}", c.sql);
    assert!(c.sql.starts_with("SELECT stadium.capacity, d.n"), "{}", c.sql);
}

#[test]
fn a_column_on_the_wrong_table_is_left_alone_unless_one_key_leads_to_it() {
    let unchanged = [
        // No table of the SELECT has a key to a table with it.
        "SELECT s.capacity FROM singer AS s JOIN stadium AS st ON true",
        // The other table's keys lead to tables without it (concert, singer).
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id",
        // Two tables of the SELECT each lead to one with it.
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id JOIN concert AS c ON x.concert_id = c.concert_id \
         JOIN concert AS d ON x.concert_id = d.concert_id",
        // A derived table named like the table that would be joined.
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
         JOIN concert AS c ON x.concert_id = c.concert_id JOIN (SELECT 1 AS k) AS stadium ON true",
        // A derived table with renamed columns, or a function, in the FROM.
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
         JOIN concert AS c ON x.concert_id = c.concert_id JOIN (SELECT 1) AS d(k) ON true",
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
         JOIN concert AS c ON x.concert_id = c.concert_id JOIN generate_series(1, 2) AS g ON true",
        // A bare name the joined table has (name) would be captured from singer.
        "SELECT name, s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
         JOIN concert AS c ON x.concert_id = c.concert_id",
        // The query does not join the tables (or no key links them): nothing says a
        // singer's row belongs with a concert's.
        "SELECT s.capacity FROM singer AS s JOIN concert AS c ON true",
        "SELECT s.capacity FROM singer AS s, concert AS c WHERE c.year = 2014",
        "SELECT s.capacity FROM singer AS s, singer_in_concert AS x, concert AS c WHERE c.year = 2014",
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON true JOIN concert AS c ON true",
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id JOIN concert AS c ON true",
        // A derived table whose columns are not all known by name: `*` (here of a CTE
        // named like a table), a column PostgreSQL names after what it computes.
        "WITH concert AS (SELECT st.name FROM stadium AS st) SELECT x.name FROM singer_in_concert AS x \
         JOIN (SELECT * FROM concert) AS d ON true",
        "SELECT x.name FROM singer_in_concert AS x JOIN (SELECT st.name COLLATE \"C\" FROM stadium AS st) AS d ON true",
        // A derived table returns a column of that name (known, or through `*`).
        "SELECT x.name FROM singer_in_concert AS x JOIN concert AS c ON c.concert_id = x.concert_id \
         JOIN (SELECT st.stadium_id, st.name FROM stadium AS st) AS v ON v.stadium_id = c.stadium_id",
        "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
         JOIN concert AS c ON x.concert_id = c.concert_id JOIN (SELECT * FROM stadium) AS v ON true",
    ];
    for sql in unchanged {
        let a = run(sql);
        assert!(!joined(&a), "{sql}: {:?} -> {}", a.fired, a.sql);
    }
    // The qualifier's own table has a key to one with it that is not known to be unique:
    // no other table's key is taken instead.
    let mut s = star_schema();
    s.tables.push(serde_json::from_value(crate::schema::tests::table_json(9, "arena", &["capacity"], &[])).expect("table"));
    s.foreign_keys.push(serde_json::from_value(serde_json::json!(
        {"table": "singer", "columns": ["age"], "ref_table": "arena", "ref_columns": ["capacity"]})).expect("fk"));
    let sql = "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
               JOIN concert AS c ON x.concert_id = c.concert_id";
    assert!(joined(&run(sql)), "{sql}");
    let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
    assert!(!joined(&a), "{:?} -> {}", a.fired, a.sql);
    // A key of several columns to a table with it, or a key to the qualifier's table from
    // one with it (one row to many), is a link too: another table's key is not taken.
    let t = crate::schema::tests::table_json;
    let key = |v: serde_json::Value| serde_json::from_value::<crate::schema::ForeignKey>(v).expect("fk");
    let mut s = star_schema();
    s.tables.push(serde_json::from_value(t(10, "performance", &["concert_id", "singer_id", "name"], &["concert_id", "singer_id"])).expect("table"));
    s.tables.push(serde_json::from_value(t(11, "review", &["review_id", "concert_id", "singer_id"], &["review_id"])).expect("table"));
    s.tables.push(serde_json::from_value(t(12, "ticket", &["ticket_id", "stadium_id", "concert_id"], &["ticket_id"])).expect("table"));
    s.foreign_keys.push(key(serde_json::json!({"table": "review", "columns": ["concert_id", "singer_id"], "ref_table": "performance", "ref_columns": ["concert_id", "singer_id"]})));
    s.foreign_keys.push(key(serde_json::json!({"table": "review", "columns": ["concert_id"], "ref_table": "concert", "ref_columns": ["concert_id"]})));
    s.foreign_keys.push(key(serde_json::json!({"table": "ticket", "columns": ["stadium_id"], "ref_table": "stadium", "ref_columns": ["stadium_id"]})));
    s.foreign_keys.push(key(serde_json::json!({"table": "ticket", "columns": ["concert_id"], "ref_table": "concert", "ref_columns": ["concert_id"]})));
    for sql in [
        // review's two-column key leads to performance.name; concert's key to stadium.name.
        "SELECT r.name FROM review AS r JOIN concert AS c ON c.concert_id = r.concert_id",
        // concert, which has concert_name, points to stadium; ticket's key to concert.
        "SELECT st.concert_name FROM stadium AS st JOIN ticket AS t ON t.stadium_id = st.stadium_id",
    ] {
        let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
        assert!(!joined(&a), "{sql}: {:?} -> {}", a.fired, a.sql);
    }
}

#[test]
fn a_table_the_statement_never_declares_is_joined_by_the_one_key_to_it() {
    // PostgreSQL: missing FROM-clause entry for table "singer".
    let a = run("SELECT DISTINCT singer.name FROM singer_in_concert JOIN concert ON singer_in_concert.concert_id = concert.concert_id \
                 WHERE concert.year = 2014");
    assert_eq!(
        a.sql,
        "SELECT DISTINCT singer.name FROM singer_in_concert JOIN concert ON singer_in_concert.concert_id = concert.concert_id \
         LEFT JOIN singer ON singer_in_concert.singer_id = singer.singer_id WHERE concert.year = 2014"
    );
    assert_eq!(a.fired, vec!["agent: singer joined on singer_in_concert.singer_id for singer.name".to_string()]);
    // The table with the key has an alias; two columns, one join.
    let b = run("SELECT stadium.name, stadium.capacity FROM concert AS c WHERE c.year = 2014 ORDER BY stadium.capacity");
    assert_eq!(
        b.sql,
        "SELECT stadium.name, stadium.capacity FROM concert AS c LEFT JOIN stadium ON c.stadium_id = stadium.stadium_id \
         WHERE c.year = 2014 ORDER BY stadium.capacity"
    );
}

#[test]
fn an_undeclared_table_is_left_alone_unless_one_key_of_the_select_leads_to_it() {
    let unchanged = [
        // No table of the SELECT has a key to it (singer_in_concert points to singer).
        "SELECT singer.name FROM concert AS c",
        // Declared by the enclosing query: its row, not a join.
        "SELECT name FROM singer WHERE EXISTS (SELECT 1 FROM singer_in_concert AS x WHERE singer.age > 30)",
        // Or by a function of that name there, without an alias.
        "SELECT * FROM singer(1) WHERE EXISTS (SELECT 1 FROM singer_in_concert AS x WHERE singer.age > 30)",
        // The table lacks the column.
        "SELECT singer.capacity FROM singer_in_concert AS x",
        // A CTE of that name.
        "WITH singer AS (SELECT 1 AS age) SELECT singer.age FROM singer_in_concert AS x",
        // A table of the SELECT has the column: another rule's business.
        "SELECT stadium.name FROM singer_in_concert AS x JOIN singer AS s ON s.singer_id = x.singer_id",
        // Used in a join's ON.
        "SELECT 1 FROM singer_in_concert AS x JOIN concert AS c ON singer.age = c.year",
        // Already in the FROM under an alias (PostgreSQL: invalid reference to the table).
        "SELECT singer.age FROM singer_in_concert AS x JOIN singer AS s ON s.singer_id = x.singer_id",
        // Two tables of the SELECT have a key to it.
        "SELECT singer.age FROM singer_in_concert AS x JOIN singer_in_concert AS y ON x.concert_id = y.concert_id",
    ];
    for sql in unchanged {
        let a = run(sql);
        assert!(!joined(&a), "{sql}: {:?} -> {}", a.fired, a.sql);
    }
    // Two keys of the one table to it.
    let mut s = star_schema();
    s.foreign_keys.push(serde_json::from_value(serde_json::json!(
        {"table": "concert", "columns": ["year"], "ref_table": "stadium", "ref_columns": ["stadium_id"]})).expect("fk"));
    let a = align("SELECT stadium.capacity FROM concert AS c", &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
    assert!(!joined(&a), "{:?}", a.fired);
}

#[test]
fn two_keys_to_tables_that_have_it_are_ambiguous() {
    // singer_in_concert points to singer and concert; give singer a year too.
    let mut s = star_schema();
    let year = s.tables[0].columns[3].clone();
    assert_eq!(year.name, "year");
    s.tables[1].columns.push(year);
    let sql = "SELECT sc.year FROM singer_in_concert AS sc JOIN stadium AS st ON st.stadium_id = 1";
    let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
    assert!(!joined(&a), "{:?}", a.fired);
    // With one of them: joined.
    let a = run(sql);
    assert!(a.sql.contains("LEFT JOIN concert ON sc.concert_id = concert.concert_id"), "{}", a.sql);
    assert!(a.sql.starts_with("SELECT concert.year FROM"), "{}", a.sql);
}

#[test]
fn only_the_table_postgresql_finds_and_only_to_one_row() {
    // A look-alike in another schema, off the search path, with a key to a table that has it:
    // an unqualified name is never taken for it.
    let mut s = star_schema();
    let mut concert = s.tables[0].clone();
    concert.oid = 50;
    concert.schema = "aaa".into();
    concert.ident = "aaa.concert".into();
    concert.columns.retain(|c| c.name != "year");
    let mut stadium = s.tables[3].clone();
    stadium.oid = 51;
    stadium.schema = "aaa".into();
    stadium.ident = "aaa.stadium".into();
    stadium.name = "arena".into();
    stadium.ident = "aaa.arena".into();
    let mut fk = s.foreign_keys[0].clone();
    fk.table = "aaa.concert".into();
    fk.ref_table = "aaa.arena".into();
    s.tables.insert(0, concert);
    s.tables.push(stadium);
    s.foreign_keys.push(fk);
    let sql = "SELECT c.capacity FROM concert AS c JOIN singer AS si ON true";
    let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
    assert!(!a.sql.contains("aaa."), "{}", a.sql);
    // A key to a column not known to be unique: no join.
    let mut s = star_schema();
    s.tables[3].primary_key.clear();
    let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
    assert!(!joined(&a), "{:?}", a.fired);
    // ... unless profiling inferred it (it points to a key found unique).
    s.foreign_keys[0].inferred = true;
    let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
    assert!(a.sql.contains("LEFT JOIN stadium ON c.stadium_id = stadium.stadium_id"), "{}", a.sql);
}
