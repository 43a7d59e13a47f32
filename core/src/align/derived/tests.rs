use super::super::{align, Context, NoValues, Rules};
use super::matching;
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
    assert_eq!(matching("student_id", &["id", "name"]), Some("id"));
    assert_eq!(matching("total_sales", &["total", "sales"]), None);
    assert_eq!(matching("name_first", &["first_name", "last_name"]), Some("first_name"));
    assert_eq!(matching("revenue", &["total", "n"]), None);
    assert_eq!(matching("x", &["?column?"]), None);
}
