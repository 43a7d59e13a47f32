use super::super::{align, Context, NoValues, Rules};
use super::{matching, prefixed};
use crate::schema::tests::star_schema;

fn fix(sql: &str) -> super::super::Aligned {
    align(sql, &star_schema(), Context::default(), &mut NoValues, Rules::ALL)
}

#[test]
fn a_cte_column_is_the_one_it_returns_that_matches() {
    // `s.id` where the CTE returns singer_id: the one column whose words hold it.
    let a = fix("WITH s AS (SELECT singer_id, count(*) AS n FROM singer_in_concert GROUP BY singer_id) SELECT singer.name FROM singer JOIN s ON s.id = singer.singer_id ORDER BY s.n DESC");
    assert_eq!(a.sql, "WITH s AS (SELECT singer_id, count(*) AS n FROM singer_in_concert GROUP BY singer_id) SELECT singer.name FROM singer JOIN s ON s.singer_id = singer.singer_id ORDER BY s.n DESC");
    assert!(a.fired.iter().any(|f| f.contains("s.id -> s.singer_id")), "{:?}", a.fired);
    // a typo of what a subquery returns, and a name the block reads unqualified
    let b = fix("SELECT t.concerts FROM (SELECT stadium_id, count(*) AS concert_count FROM concert GROUP BY stadium_id) AS t ORDER BY concert_cnt DESC");
    assert!(!b.fired.iter().any(|f| f.contains("t.concerts")), "{:?}", b.fired);
    let c = fix("SELECT t.stadium_id FROM (SELECT stadium_id, count(*) AS concert_count FROM concert GROUP BY stadium_id) AS t ORDER BY concert_cuont DESC");
    assert_eq!(c.sql, "SELECT t.stadium_id FROM (SELECT stadium_id, count(*) AS concert_count FROM concert GROUP BY stadium_id) AS t ORDER BY concert_count DESC");
    // the same words in another order; count(*) is returned as `count`
    let d = fix("WITH x AS (SELECT stadium_id, count(*) FROM concert GROUP BY stadium_id) SELECT x.id_stadium, x.count FROM x");
    assert_eq!(d.sql, "WITH x AS (SELECT stadium_id, count(*) FROM concert GROUP BY stadium_id) SELECT x.stadium_id, x.count FROM x");
    // a column list renames what the CTE returns
    let e = fix("WITH x (sid, total) AS (SELECT stadium_id, count(*) FROM concert GROUP BY stadium_id) SELECT x.stadium_id FROM x");
    assert!(e.fired.is_empty(), "{:?}", e.fired);
}

#[test]
fn never_by_guess() {
    for sql in [
        // two columns hold `id`
        "WITH s AS (SELECT singer_id, concert_id FROM singer_in_concert) SELECT s.id FROM s",
        // `*` of a join: what it returns is not known here
        "WITH s AS (SELECT * FROM singer JOIN singer_in_concert USING (singer_id)) SELECT s.id FROM s",
        // nothing like it
        "WITH s AS (SELECT singer_id FROM singer_in_concert) SELECT s.salary FROM s",
        // a table's column is the other rules' concern, and a name a table of the statement
        // has may be an enclosing block's (correlated)
        "SELECT name FROM singer WHERE EXISTS (SELECT 1 FROM (SELECT concert_id FROM concert) AS c WHERE c.concert_id > age)",
        // ORDER BY an unnamed output column by the name PostgreSQL gives it
        "SELECT sub1.concert_count, count(*) FROM (SELECT singer_id, count(*) AS concert_count FROM singer_in_concert GROUP BY singer_id) AS sub1 GROUP BY sub1.concert_count ORDER BY count DESC",
        // a CTE named like a table reads the table in its own body
        "WITH stadium AS (SELECT stadium_id, capacity AS stadium_capacity FROM stadium WHERE capacity > 5000) SELECT stadium_capacity FROM stadium",
        // a WITH in a subquery: its CTEs are that subquery's
        "SELECT name FROM singer WHERE singer_id IN (WITH x AS (SELECT singer_id FROM singer_in_concert) SELECT x.singer_id FROM x)",
        // a function's columns, correlated
        "SELECT * FROM unnest(ARRAY[1, 2]) AS u(concert) WHERE EXISTS (SELECT 1 FROM (SELECT concert_id FROM concert) AS c WHERE c.concert_id = concert)",
        // a whole-row reference
        "WITH totals AS (SELECT stadium_id, count(*) AS total FROM concert GROUP BY stadium_id) SELECT row_to_json(totals) FROM totals",
        // the grammar's name for nothing fits is evidence, never a typo
        "WITH s AS (SELECT singer_id, unknown_salary_total FROM singer_in_concert) SELECT s.unknown_salary FROM s",
    ] {
        let a = fix(sql);
        assert!(!a.fired.iter().any(|f| f.contains("what the relation returns")), "{sql}: {:?}", a.fired);
    }
    // `*` of one table is that table's columns
    let a = fix("WITH s AS (SELECT * FROM stadium) SELECT s.capacty FROM s");
    assert_eq!(a.sql, "WITH s AS (SELECT * FROM stadium) SELECT s.capacity FROM s");
}

#[test]
fn matching_takes_one_match_per_step() {
    assert_eq!(matching("id", &["singer_id", "name"]), Some("singer_id"));
    assert_eq!(matching("id", &["singer_id", "concert_id"]), None);
    // the written name holding a column's is not enough: `customer_name` may be another
    // table's name
    assert_eq!(matching("student_id", &["id", "name"]), None);
    assert_eq!(matching("total_sales", &["total", "sales"]), None);
    assert_eq!(matching("name_first", &["first_name", "last_name"]), Some("first_name"));
    assert_eq!(matching("revenue", &["total", "n"]), None);
    assert_eq!(matching("x", &["?column?"]), None);
}

#[test]
fn a_column_after_its_relations_name_is_that_column() {
    let people = ["id".to_string(), "first_name".to_string()];
    let sales = ["id".to_string(), "salesperson_id".to_string()];
    assert_eq!(prefixed("salesperson_id", &[("salespersons", &people)]), Some("id"));
    assert_eq!(prefixed("salespersons_first_name", &[("salespersons", &people)]), Some("first_name"));
    // another relation's name, or two relations that fit
    assert_eq!(prefixed("customer_id", &[("salespersons", &people)]), None);
    assert_eq!(prefixed("sale_id", &[("sale", &people), ("sales", &sales)]), None);
}

#[test]
fn a_block_of_a_with_reads_its_own_relations_only() {
    // b's body reads singer, which has `name`, not `singer_name`; another block's table
    // having a name does not make it this block's; the select list keeps the name written
    let a = fix("WITH a AS (SELECT singer_id, count(*) AS n FROM singer_in_concert GROUP BY singer_id), b AS (SELECT singer_id, singer_name FROM singer) SELECT b.singer_name, a.n FROM a JOIN b ON a.singer_id = b.singer_id");
    assert_eq!(a.sql, "WITH a AS (SELECT singer_id, count(*) AS n FROM singer_in_concert GROUP BY singer_id), b AS (SELECT singer_id, name AS singer_name FROM singer) SELECT b.singer_name, a.n FROM a JOIN b ON a.singer_id = b.singer_id");
    // a CTE reading the wrong table's column by a typo of its own table's
    let b = fix("WITH c AS (SELECT stadium_id, count(*) AS n FROM concert GROUP BY stadium_id) SELECT name, c.n FROM stadium JOIN c USING (stadium_id) ORDER BY capacty DESC");
    assert!(b.sql.ends_with("ORDER BY capacity DESC"), "{}", b.sql);
    // an output alias, and a name in a subquery of the block (it may be correlated), stay
    for sql in [
        "WITH c AS (SELECT stadium_id, count(*) AS total FROM concert GROUP BY stadium_id) SELECT stadium_id, total AS t FROM c ORDER BY t DESC",
        "WITH c AS (SELECT stadium_id FROM concert) SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM c WHERE capacity > 10)",
    ] {
        let a = fix(sql);
        assert!(!a.fired.iter().any(|f| f.contains("what the relation returns")), "{sql}: {:?}", a.fired);
    }
}

#[test]
fn a_tables_column_after_the_tables_name_is_that_column() {
    // the prefixed form in a WITH's block, where the table is qualified by an alias
    let a = fix("WITH c AS (SELECT s.stadium_capacity, s.stadium_id FROM stadium AS s) SELECT c.stadium_capacity FROM c");
    assert_eq!(a.sql, "WITH c AS (SELECT s.capacity AS stadium_capacity, s.stadium_id FROM stadium AS s) SELECT c.stadium_capacity FROM c");
    // not where another relation of the block has the name (the wrong table: other rules)
    let b = fix("WITH c AS (SELECT x.singer_id FROM singer_in_concert AS y JOIN concert AS x ON x.concert_id = y.concert_id) SELECT c.singer_id FROM c");
    assert!(!b.fired.iter().any(|f| f.contains("what the relation returns")), "{:?}", b.fired);
}

#[test]
fn a_column_read_from_a_relation_the_block_lacks_is_the_one_relation_returning_it() {
    // an alias no FROM item declares, in a block reading a subquery: the subquery returns the
    // column, the table does not
    let a = fix("SELECT avg(t2.total - t1.year) FROM concert AS t1 JOIN (SELECT concert_id, count(*) AS total FROM singer_in_concert GROUP BY concert_id) AS sub ON t1.concert_id = sub.concert_id");
    assert_eq!(a.sql, "SELECT avg(sub.total - t1.year) FROM concert AS t1 JOIN (SELECT concert_id, count(*) AS total FROM singer_in_concert GROUP BY concert_id) AS sub ON t1.concert_id = sub.concert_id");
    assert!(a.fired.iter().any(|f| f.contains("t2.total -> sub.total")), "{:?}", a.fired);
    // a table's alias with a column the subquery returns
    let b = fix("SELECT c.concert_name, c.total FROM concert AS c JOIN (SELECT concert_id, count(*) AS total FROM singer_in_concert GROUP BY concert_id) AS s ON c.concert_id = s.concert_id");
    assert!(b.sql.starts_with("SELECT c.concert_name, s.total FROM"), "{}", b.sql);
    // a CTE block: a table's column written with the CTE's alias's neighbour
    let c = fix("WITH n AS (SELECT stadium_id, count(*) AS shows FROM concert GROUP BY stadium_id) SELECT st.name, st.shows FROM stadium AS st JOIN n ON n.stadium_id = st.stadium_id");
    assert!(c.sql.ends_with("SELECT st.name, n.shows FROM stadium AS st JOIN n ON n.stadium_id = st.stadium_id"), "{}", c.sql);
    // an undeclared qualifier in a CTE's own block (nothing encloses it)
    let d = fix("WITH n AS (SELECT x.stadium_id, count(*) AS shows FROM concert GROUP BY x.stadium_id) SELECT n.shows FROM n");
    assert!(d.sql.starts_with("WITH n AS (SELECT concert.stadium_id, count(*) AS shows FROM concert GROUP BY concert.stadium_id)"), "{}", d.sql);
}

#[test]
fn a_column_of_another_relation_is_never_requalified_by_guess() {
    let sub = "(SELECT concert_id, stadium_id, count(*) AS total FROM singer_in_concert JOIN concert USING (concert_id) GROUP BY concert_id, stadium_id) AS s";
    for sql in [
        // two relations return it
        format!("SELECT t9.stadium_id FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id"),
        // none does
        format!("SELECT t9.capacity FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id"),
        // compared with a column of that name: requalified, it would compare a column with itself
        format!("SELECT c.concert_name FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id WHERE t9.total > s.total"),
        format!("SELECT c.concert_name FROM concert AS c JOIN {sub} ON c.total = s.total"),
        // a typo of the table's own column is the column rule's
        format!("SELECT c.yaer FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id"),
        // a qualifier an enclosing block declares: a correlated reference
        format!("SELECT name FROM singer AS t9 WHERE EXISTS (SELECT 1 FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id WHERE t9.total > 1)"),
        // ... or may declare: a function's FROM item is known by the function's name
        "SELECT c.concert_name FROM concert AS c, LATERAL jsonb_each('{}') WHERE EXISTS (SELECT 1 FROM (SELECT stadium_id, name AS key FROM stadium) AS st \
         WHERE st.stadium_id = c.stadium_id AND jsonb_each.key = 'a')".to_string(),
        // a qualifier naming a table or a CTE that has the column: the query may need it
        format!("SELECT c.concert_name, stadium.name FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id"),
        "WITH a AS (SELECT stadium_id, count(*) AS shows FROM concert GROUP BY stadium_id), b AS (SELECT stadium_id, count(*) AS shows FROM concert \
         WHERE year = 2014 GROUP BY stadium_id) SELECT b.stadium_id, a.shows FROM b".to_string(),
        // compared with what a subquery selects: requalified, it would be compared with itself
        format!("SELECT c.concert_name FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id WHERE c.total IN (SELECT s.total FROM stadium)"),
        format!("SELECT c.concert_name FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id WHERE c.total > (SELECT s.total FROM stadium LIMIT 1) + 0"),
        format!("SELECT c.concert_name FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id WHERE c.total IN (SELECT s.total FROM stadium UNION ALL SELECT 0)"),
        format!("SELECT c.concert_name FROM concert AS c JOIN {sub} ON c.concert_id = s.concert_id WHERE c.total = coalesce((SELECT s.total FROM stadium), 0)"),
        // a qualifier another block declares: that block's relation was meant
        "WITH a AS (SELECT stadium_id, count(*) AS shows FROM concert GROUP BY stadium_id) SELECT st.name, x.shows FROM stadium AS st JOIN a ON a.stadium_id = st.stadium_id \
         WHERE st.stadium_id IN (SELECT x.stadium_id FROM (SELECT stadium_id, count(*) AS shows FROM concert WHERE year = 2014 GROUP BY stadium_id) AS x)".to_string(),
        // a system column every table has
        "SELECT c.ctid FROM concert AS c JOIN (SELECT concert_id, ctid FROM singer_in_concert) AS s ON c.concert_id = s.concert_id".to_string(),
        // a column like one of the table's own (`concert_name`): the column rule's
        "SELECT c.name FROM concert AS c JOIN (SELECT stadium_id, name FROM stadium) AS st ON st.stadium_id = c.stadium_id".to_string(),
    ] {
        let a = fix(&sql);
        assert!(!a.fired.iter().any(|f| f.contains("the relation of the block that returns it")), "{sql}: {:?}", a.fired);
    }
}

#[test]
fn a_column_like_the_tables_own_is_the_tables() {
    // beside a subquery returning `name`, `c.name` of concert is its concert_name
    let a = fix("SELECT c.name FROM concert AS c JOIN (SELECT stadium_id, name FROM stadium) AS st ON st.stadium_id = c.stadium_id");
    assert!(a.sql.starts_with("SELECT c.concert_name FROM"), "{}", a.sql);
}

#[test]
fn a_bare_column_beside_a_function_in_from_may_be_the_functions() {
    // `key` is a column of the outer block's jsonb_each_text (correlated), not a typo of the
    // subquery's `stadium_key`
    for sql in [
        "SELECT c.concert_name FROM concert AS c, jsonb_each_text('{}') WHERE EXISTS (SELECT 1 FROM (SELECT stadium_id, name AS stadium_key FROM stadium) AS st \
         WHERE st.stadium_id = c.stadium_id AND key = 'a')",
        "SELECT c.concert_name FROM concert AS c, LATERAL jsonb_each_text('{}') AS j WHERE EXISTS (SELECT 1 FROM (SELECT stadium_id, name AS stadium_key FROM stadium) AS st \
         WHERE st.stadium_id = c.stadium_id AND key = 'a')",
    ] {
        let a = fix(sql);
        assert!(!a.sql.contains("stadium_key = 'a'"), "{sql}: {:?}", a);
    }
}
