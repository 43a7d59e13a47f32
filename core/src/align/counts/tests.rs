use super::super::{align, Context, NoValues, Rules};
use crate::schema::tests::{star_schema, two_schemas};
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

/// Asserts that none of `sqls` parses into something the module's rules change.
fn untouched(sqls: &[&str]) {
    for sql in sqls {
        assert!(sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, sql).is_ok(), "does not parse: {sql}");
        let (out, ours) = counted(sql);
        assert!(!ours, "{sql} -> {out}");
    }
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
    // In a subquery, resolved where it is written; FILTER and pg_catalog kept.
    assert_eq!(
        counted("SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert GROUP BY stadium_id HAVING sum(concert_id) > 2)").0,
        "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert GROUP BY stadium_id HAVING count(concert_id) > 2)"
    );
    assert_eq!(
        counted("SELECT pg_catalog.sum(singer_id) FILTER (WHERE age > 30) FROM singer").0,
        "SELECT pg_catalog.count(singer_id) FILTER (WHERE age > 30) FROM singer"
    );
    // A schema's table, as written.
    assert_eq!(aligned(&two_schemas(), "SELECT sum(stadium_id) FROM music.concert").0, "SELECT count(stadium_id) FROM music.concert");
    // Quoted, in mixed case.
    let quoted: Schema = serde_json::from_value(serde_json::json!({"tables": [
        {"oid": 1, "schema": "public", "name": "Singer", "ident": "\"Singer\"", "kind": "r", "comment": null, "primary_key": ["SingerId"],
         "columns": [{"name": "SingerId", "ident": "\"SingerId\"", "data_type": "integer", "comment": null}]}]}))
    .expect("schema");
    assert_eq!(aligned(&quoted, "SELECT sum(\"SingerId\") FROM \"Singer\"").0, "SELECT count(\"SingerId\") FROM \"Singer\"");
    // Unquoted it folds to singerid, which the table lacks: this rule alone leaves it (the
    // agent's rules, when on, first make it the column "SingerId").
    let only_functions = Rules { agent: false, ..Rules::ALL };
    let a = align("SELECT sum(SingerId) FROM \"Singer\"", &quoted, Context::default(), &mut NoValues, only_functions);
    assert_eq!(a.sql, "SELECT sum(SingerId) FROM \"Singer\"");
    assert_eq!(aligned(&quoted, "SELECT sum(SingerId) FROM \"Singer\"").0, "SELECT count(\"SingerId\") FROM \"Singer\"");
    // The inner table's key where an inner table shadows the outer one's name.
    assert_eq!(
        counted("SELECT name FROM singer AS s WHERE 2 < (SELECT sum(s.concert_id) FROM concert AS s)").0,
        "SELECT name FROM singer AS s WHERE 2 < (SELECT count(s.concert_id) FROM concert AS s)"
    );
}

#[test]
fn a_measure_summed_stays_a_sum() {
    untouched(&[
        "SELECT sum(capacity) FROM stadium",
        "SELECT sum(year) FROM concert",
        // A window: a running sum is left as written.
        "SELECT name, sum(singer_id) OVER (ORDER BY age) FROM singer",
        // A CTE's column, a derived table's, a function's: not known to be keys.
        "WITH x AS (SELECT singer_id FROM singer) SELECT sum(singer_id) FROM x",
        "WITH singer AS (SELECT 1 AS singer_id) SELECT sum(singer_id) FROM singer",
        "SELECT sum(d.singer_id) FROM (SELECT singer_id FROM singer) AS d",
        "SELECT sum(singer_id) FROM generate_series(1, 3) AS singer_id",
        // A bare name two tables hold: PostgreSQL decides.
        "SELECT sum(singer_id) FROM singer JOIN singer_in_concert USING (singer_id)",
        // An expression over a key is not the key.
        "SELECT sum(singer_id * 2) FROM singer",
        // Another schema's function named sum, or one quoted in another case.
        "SELECT stats.sum(singer_id) FROM singer",
        "SELECT \"SUM\"(singer_id) FROM singer",
        // A derived table's or a CTE's column named like the outer table's key (without the
        // guard on unknown FROM items it would resolve to singer.singer_id outside).
        "SELECT name FROM singer WHERE age < (SELECT sum(singer_id) FROM (SELECT capacity AS singer_id FROM stadium) AS d)",
        "SELECT name FROM singer WHERE age < (WITH stadium AS (SELECT capacity AS singer_id FROM stadium) SELECT sum(singer_id) FROM stadium)",
        // Summed where the statement groups on a column of its name: it may be the group's name.
        "SELECT sum(DISTINCT singer_id) FROM singer_in_concert GROUP BY singer_id",
        "SELECT name, sum(singer_id) FROM singer GROUP BY singer_id",
        "SELECT sum(DISTINCT singer_id) FROM singer_in_concert GROUP BY ROLLUP (singer_id)",
        "SELECT singer_id AS s, sum(DISTINCT singer_id) FROM singer_in_concert GROUP BY s",
        "SELECT singer_id, sum(DISTINCT singer_id) FROM singer_in_concert GROUP BY 1",
        "SELECT name FROM singer WHERE singer_id IN (SELECT sum(DISTINCT singer_id) FROM singer_in_concert GROUP BY singer_id)",
    ]);
    // A table name two schemas hold: written alone, which one PostgreSQL reads depends on the
    // search path; the rule compares names only, so a qualified one is left too.
    let (out, fired) = aligned(&two_schemas(), "SELECT sum(singer_id) FROM pop.singer");
    assert_eq!(out, "SELECT sum(singer_id) FROM pop.singer", "{fired:?}");
}

#[test]
fn an_inferred_key_counts_only_where_a_key_references_it() {
    let mut s = star_schema();
    // stadium's key was inferred by profiling; concert.stadium_id references it.
    s.tables[3].key_inferred = true;
    let (out, _) = aligned(&s, "SELECT sum(stadium_id) FROM stadium");
    assert_eq!(out, "SELECT count(stadium_id) FROM stadium");
    // Found by profiling too, the foreign key makes concert.stadium_id an identifier.
    s.foreign_keys[0].inferred = true;
    assert_eq!(aligned(&s, "SELECT sum(stadium_id) FROM concert").0, "SELECT count(stadium_id) FROM concert");
    // Nothing references it: a unique column may be a measure.
    s.foreign_keys.retain(|fk| fk.ref_table != "stadium");
    let (out, fired) = aligned(&s, "SELECT sum(stadium_id) FROM stadium");
    assert_eq!(out, "SELECT sum(stadium_id) FROM stadium", "{fired:?}");
}

#[test]
fn a_foreign_key_to_a_column_other_than_a_key_may_be_a_measure() {
    let mut s = star_schema();
    // concert.year references stadium.capacity (no key of stadium): both are measures.
    s.foreign_keys.push(serde_json::from_value(serde_json::json!(
        {"table": "concert", "columns": ["year"], "ref_table": "stadium", "ref_columns": ["capacity"]})).expect("fk"));
    assert_eq!(aligned(&s, "SELECT sum(year) FROM concert").0, "SELECT sum(year) FROM concert");
    assert_eq!(aligned(&s, "SELECT sum(capacity) FROM stadium").0, "SELECT sum(capacity) FROM stadium");
    // A column of a two-column foreign key is not one row's key.
    let mut s = star_schema();
    s.foreign_keys.retain(|fk| fk.table != "concert");
    s.foreign_keys.push(serde_json::from_value(serde_json::json!(
        {"table": "concert", "columns": ["stadium_id", "year"], "ref_table": "stadium", "ref_columns": ["stadium_id", "capacity"]})).expect("fk"));
    assert_eq!(aligned(&s, "SELECT sum(stadium_id) FROM concert").0, "SELECT sum(stadium_id) FROM concert");
}

#[test]
fn a_count_grouped_by_what_it_counts_is_one_count() {
    assert_eq!(
        counted("SELECT count(DISTINCT sic.singer_id) AS n FROM singer_in_concert AS sic JOIN concert AS c ON sic.concert_id = c.concert_id WHERE c.year = '2014' GROUP BY sic.singer_id").0,
        "SELECT count(DISTINCT sic.singer_id) AS n FROM singer_in_concert AS sic JOIN concert AS c ON sic.concert_id = c.concert_id WHERE c.year = '2014'"
    );
    // An ORDER BY naming the count, parentheses around the key.
    assert_eq!(
        counted("SELECT count(DISTINCT (concert_id)) AS n FROM singer_in_concert GROUP BY (concert_id) ORDER BY n DESC").0,
        "SELECT count(DISTINCT (concert_id)) AS n FROM singer_in_concert ORDER BY n DESC"
    );
    // The largest of counts that are all 1, once the nested aggregate is unwrapped: the
    // number of distinct values, which is what a count of them asks (a choice; both forms
    // before it return 1).
    assert_eq!(
        counted("SELECT max(count(DISTINCT concert_id)) FROM singer_in_concert GROUP BY concert_id").0,
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert ORDER BY count(DISTINCT concert_id) DESC LIMIT 1"
    );
}

#[test]
fn a_list_trimmed_to_what_was_asked_is_read_again() {
    // The style rule drops the key nobody asked for; what is left counts 1 in every group.
    let select = ["number of singers".to_string()];
    let cx = Context { select: &select, linked: &[], shown: &[], question: "" };
    let sql = "SELECT singer_id, count(DISTINCT singer_id) FROM singer GROUP BY singer_id";
    let a = align(sql, &star_schema(), cx, &mut NoValues, Rules::ALL);
    assert_eq!(a.sql, "SELECT count(DISTINCT singer_id) FROM singer");
    assert!(a.fired.iter().any(|f| f.contains("1 in every group")), "{:?}", a.fired);
    // Without the style rules the key names the groups: left as written.
    let a = align(sql, &star_schema(), cx, &mut NoValues, Rules { style: false, ..Rules::ALL });
    assert_eq!(a.sql, sql);
    // A list the style rule leaves alone (the key's name is in what was asked) keeps its groups.
    let select = ["count per singerid".to_string()];
    let a = align(sql, &star_schema(), Context { select: &select, linked: &[], shown: &[], question: "" }, &mut NoValues, Rules::ALL);
    assert_eq!(a.sql, sql);
}

#[test]
fn a_grouping_that_names_counts_or_filters_its_groups_stays() {
    untouched(&[
        // The groups are named, or grouped by another column.
        "SELECT concert_id, count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id",
        "SELECT count(DISTINCT singer_id) FROM singer_in_concert GROUP BY concert_id",
        // Another aggregate differs from group to group, or names it.
        "SELECT count(DISTINCT singer_id) AS n, count(*) AS shows FROM singer_in_concert GROUP BY singer_id ORDER BY shows DESC LIMIT 1",
        "SELECT max(singer_id), count(DISTINCT singer_id) FROM singer_in_concert GROUP BY singer_id",
        "SELECT count(DISTINCT singer_id) + count(*) OVER () FROM singer_in_concert GROUP BY singer_id",
        // Without DISTINCT the count is the group's rows; with FILTER, some of them.
        "SELECT count(concert_id) FROM singer_in_concert GROUP BY concert_id",
        "SELECT count(DISTINCT concert_id) FILTER (WHERE singer_id > '1') FROM singer_in_concert GROUP BY concert_id",
        // HAVING picks groups; ORDER BY a column or an expression needs them; DISTINCT ON too.
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id HAVING count(*) > 1",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id ORDER BY concert_id",
        "SELECT count(DISTINCT concert_id) AS concert_id FROM singer_in_concert GROUP BY concert_id ORDER BY lower(concert_id)",
        // A parenthesised body (its ORDER BY outside), an ORDER BY by position: not read.
        "(SELECT count(DISTINCT concert_id) AS n FROM singer_in_concert GROUP BY concert_id) ORDER BY n",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id ORDER BY 1",
        // An empty list.
        "SELECT FROM singer_in_concert GROUP BY concert_id",
        // An OFFSET or FETCH skips groups: on one count it would return nothing.
        "SELECT count(DISTINCT concert_id) AS n FROM singer_in_concert GROUP BY concert_id ORDER BY n DESC LIMIT 1 OFFSET 1",
        "SELECT count(DISTINCT concert_id) AS n FROM singer_in_concert GROUP BY concert_id OFFSET 1 ROWS FETCH FIRST 1 ROW ONLY",
        "SELECT count(DISTINCT concert_id) AS n FROM singer_in_concert GROUP BY concert_id FETCH FIRST 1 ROW ONLY",
        // A WINDOW clause; another schema's count.
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id WINDOW w AS (ORDER BY concert_id)",
        "SELECT stats.count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id",
        "SELECT DISTINCT ON (concert_id) count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id",
        // Grouping sets, two keys, ordinals, an expression, no key, a set operation.
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY ROLLUP (concert_id)",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id, singer_id",
        "SELECT count(DISTINCT lower(concert_id)) FROM singer_in_concert GROUP BY lower(concert_id)",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY ()",
        "SELECT count(DISTINCT concert_id) FROM singer_in_concert GROUP BY concert_id UNION SELECT 1",
        // Written differently: not known to be the same column.
        "SELECT count(DISTINCT sic.concert_id) FROM singer_in_concert AS sic GROUP BY concert_id",
        // In a subquery, whose rows are counted, averaged or tested.
        "SELECT count(*) FROM (SELECT count(DISTINCT singer_id) FROM singer_in_concert GROUP BY singer_id) AS t",
        "WITH per AS (SELECT count(DISTINCT singer_id) AS k FROM singer_in_concert GROUP BY singer_id) SELECT count(k) FROM per",
        "SELECT name FROM singer AS s WHERE NOT EXISTS (SELECT count(DISTINCT sic.singer_id) FROM singer_in_concert AS sic WHERE sic.singer_id = s.singer_id GROUP BY sic.singer_id)",
    ]);
}
