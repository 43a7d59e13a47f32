use super::super::{align, Context, NoValues, Rules};
use crate::schema::tests::star_schema;
use crate::schema::Schema;

fn aligned(schema: &Schema, sql: &str) -> (String, Vec<String>) {
    let a = align(sql, schema, Context::default(), &mut NoValues, Rules::ALL);
    (a.sql, a.fired)
}

/// The SQL `sql` aligns to on the star schema, and whether this module's rules fired.
fn counted(sql: &str) -> (String, bool) {
    let (out, fired) = aligned(&star_schema(), sql);
    let ours = fired.iter().any(|f| f.contains("adds up the key") || f.contains("1 in every group"));
    (out, ours)
}

#[test]
fn a_key_summed_is_counted() {
    // A table's primary key, a foreign key, a key read through an alias, DISTINCT kept.
    assert_eq!(counted("SELECT sum(singer_id) FROM singer").0, "SELECT count(singer_id) FROM singer");
    assert_eq!(
        counted("SELECT c.year, sum(sic.singer_id) FROM concert AS c JOIN singer_in_concert AS sic ON c.concert_id = sic.concert_id GROUP BY c.year").0,
        "SELECT c.year, count(sic.singer_id) FROM concert AS c JOIN singer_in_concert AS sic ON c.concert_id = sic.concert_id GROUP BY c.year"
    );
    assert_eq!(counted("SELECT SUM(DISTINCT s.singer_id) AS n FROM singer AS s").0, "SELECT count(DISTINCT s.singer_id) AS n FROM singer AS s");
    // In a subquery, resolved where it is written.
    assert_eq!(
        counted("SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert GROUP BY stadium_id HAVING sum(concert_id) > 2)").0,
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert GROUP BY stadium_id HAVING count(concert_id) > 2)"
    );
}

#[test]
fn a_measure_summed_stays_a_sum() {
    for sql in [
        "SELECT sum(capacity) FROM stadium",
        "SELECT sum(year) FROM concert",
        // A window: a running sum is left as written.
        "SELECT name, sum(singer_id) OVER (ORDER BY age) FROM singer",
        // A CTE's column, a derived table's: their columns are not known to be keys.
        "WITH x AS (SELECT singer_id FROM singer) SELECT sum(singer_id) FROM x",
        "SELECT sum(d.singer_id) FROM (SELECT singer_id FROM singer) AS d",
        // A bare name two tables hold: PostgreSQL decides.
        "SELECT sum(singer_id) FROM singer JOIN singer_in_concert USING (singer_id)",
        // An expression over a key is not the key.
        "SELECT sum(singer_id * 2) FROM singer",
    ] {
        let (out, ours) = counted(sql);
        assert!(!ours, "{sql} -> {out}");
    }
}

#[test]
fn an_inferred_key_counts_only_where_a_key_references_it() {
    let mut s = star_schema();
    // stadium's key was inferred by profiling; concert.stadium_id references it.
    s.tables[3].key_inferred = true;
    let (out, _) = aligned(&s, "SELECT sum(stadium_id) FROM stadium");
    assert_eq!(out, "SELECT count(stadium_id) FROM stadium");
    // Nothing references it: a unique column may be a measure.
    s.foreign_keys.retain(|fk| fk.ref_table != "stadium");
    let (out, fired) = aligned(&s, "SELECT sum(stadium_id) FROM stadium");
    assert_eq!(out, "SELECT sum(stadium_id) FROM stadium", "{fired:?}");
}

#[test]
fn a_count_grouped_by_what_it_counts_is_one_count() {
    assert_eq!(
        counted("SELECT count(DISTINCT sic.singer_id) AS n FROM singer_in_concert AS sic JOIN concert AS c ON sic.concert_id = c.concert_id WHERE c.year = '2014' GROUP BY sic.singer_id").0,
        "SELECT count(DISTINCT sic.singer_id) AS n FROM singer_in_concert AS sic JOIN concert AS c ON sic.concert_id = c.concert_id WHERE c.year = '2014'"
    );
    // Other aggregates beside it, and an ORDER BY naming the list's alias.
    assert_eq!(
        counted("SELECT count(DISTINCT concert_id) AS n, count(*) FROM singer_in_concert GROUP BY concert_id ORDER BY n DESC").0,
        "SELECT count(DISTINCT concert_id) AS n, count(*) FROM singer_in_concert ORDER BY n DESC"
    );
    // In a subquery.
    let (out, ours) = counted("SELECT name FROM singer WHERE age > (SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id)");
    assert!(ours && out.ends_with("(SELECT count(DISTINCT concert_id) FROM singer_in_concert)"), "{out}");
}

#[test]
fn a_grouping_that_names_or_filters_its_groups_stays() {
    for sql in [
        // The groups are named, or grouped by another column.
        "SELECT concert_id, count(DISTINCT singer_id) FROM singer_in_concert GROUP BY concert_id",
        "SELECT count(DISTINCT singer_id) FROM singer_in_concert GROUP BY concert_id",
        "SELECT concert_id, count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id",
        // Without DISTINCT the count is the group's rows.
        "SELECT count(concert_id) FROM singer_in_concert GROUP BY concert_id",
        // HAVING picks groups; ORDER BY a column needs them; a window sees them.
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id HAVING count(*) > 1",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id ORDER BY concert_id",
        "SELECT count(DISTINCT concert_id), count(*) OVER () FROM singer_in_concert GROUP BY concert_id",
        // A subquery in the list may read the group's key.
        "SELECT count(DISTINCT sic.concert_id), (SELECT count(*) FROM concert AS c WHERE c.concert_id = sic.concert_id) FROM singer_in_concert AS sic GROUP BY sic.concert_id",
        // Grouping sets, two keys.
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY ROLLUP (concert_id)",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id, singer_id",
    ] {
        let (out, ours) = counted(sql);
        assert!(!ours, "{sql} -> {out}");
    }
}
