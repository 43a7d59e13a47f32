//! Agent alignment of a column written with a table one key short of it: `t.drug_type`, where
//! `t` is treatments, which lacks drug_type, and treatments.drug_id points to drugs, which has
//! it. The model skipped a join; the one table a foreign key of the written table points to
//! (declared or inferred) and that has the column is joined, and the column read from there.
//! So is a column written with the name of a table the statement never declares, where one
//! table of the SELECT has the one key to it (`singer.name` in `FROM singer_in_concert JOIN
//! concert ...`, which PostgreSQL refuses: a missing FROM-clause entry). And so is a column
//! written with a table of the SELECT that has no key to a table with it, where one other table
//! of the SELECT has the one such key (`p.drug_name`, p patients, in `FROM patients p JOIN
//! treatments t ...`: the model put the column on the wrong table and skipped the join).
//!
//! Many rows to one, and a LEFT JOIN: the query keeps exactly the rows it had (a row whose key
//! finds nothing reads NULL, as a NULL column would). Left alone: a column some table of the
//! same SELECT has (another rule's business, or ambiguous), a column several such tables have,
//! a column used in a join's ON (the new table would join after it), a qualifier that is not a
//! table of the SELECT's own FROM (an enclosing query's), a table or CTE name already in use, a
//! `*` list, renamed columns, a FROM with a function or a parenthesised join (a derived table
//! with an alias is fine), a name several schemas hold written for one off the search path,
//! and a key whose referenced column is not known to be unique (the join would multiply rows).

use super::names::on_search_path;
use super::{find_table, fold, ident, parsed_joins, relation_name, top_level_exprs, Scope};
use crate::schema::{ForeignKey, Schema, Table};
use sqlparser::ast::{Expr, Join, JoinConstraint, JoinOperator, Query, Select, SelectItem, SetExpr, TableFactor, TableWithJoins, VisitMut, VisitorMut};
use std::collections::HashMap;
use std::ops::ControlFlow;

/// Most joins one SELECT gets from this rule.
const MAX_JOINS: usize = 4;

/// Every SELECT of the statement, subqueries included, on its own.
pub(super) fn join_for_qualified(schema: &Schema, sc: &Scope, q: &mut Query, fired: &mut Vec<String>) {
    struct Each<'a> {
        schema: &'a Schema,
        sc: &'a Scope,
        fired: &'a mut Vec<String>,
    }
    impl VisitorMut for Each<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            let order_by = &mut q.order_by;
            if let SetExpr::Select(s) = q.body.as_mut() {
                one_select(self.schema, self.sc, s, order_by, self.fired);
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(q, &mut Each { schema, sc, fired });
}

/// A SELECT's own tables by name (FROM item, table), and its derived tables' column names.
type Own = (HashMap<String, (usize, usize)>, Vec<String>);

/// The tables of a SELECT's own FROM, by the name each is referred to (folded): its alias, or
/// its table's name; and the names of the columns its derived tables return. A derived table
/// with an alias (its name is one the scope knows as not a table, never taken for the joined
/// one) counts only by those columns. None when a name is used twice, a derived table returns
/// columns not known here (`*`) or renames them, or a relation is anything else (a function, a
/// parenthesised join): then the SELECT is left alone.
fn own_tables(schema: &Schema, sc: &Scope, from: &[TableWithJoins]) -> Option<Own> {
    let mut out = HashMap::new();
    let mut derived = Vec::new();
    for (i, twj) in from.iter().enumerate() {
        for factor in std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)) {
            if let TableFactor::Derived { subquery, alias: Some(a), .. } = factor {
                if !a.columns.is_empty() {
                    return None;
                }
                derived.extend(super::derived::returned(subquery, schema, &HashMap::new())?);
                continue;
            }
            let TableFactor::Table { name, alias, args: None, .. } = factor else { return None };
            // Renamed columns (`AS c(a, b)`), or a name a CTE of the statement may stand for.
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return None;
            }
            let (written_schema, relname) = relation_name(name)?;
            if written_schema.is_none() && sc.other.contains(&relname) {
                return None;
            }
            let t = find_table(schema, name)?;
            // Unqualified, the name is the table PostgreSQL finds on the search path; where
            // several schemas hold a table of that name, only one on it is taken for it.
            // (A temporary or system table the schema does not list may shadow one it does.)
            if written_schema.is_none() && !on_search_path(&schema.tables[t].ident) {
                return None;
            }
            let by = alias.as_ref().map(|a| fold(&a.name)).unwrap_or_else(|| schema.tables[t].name.clone());
            if out.insert(by, (i, t)).is_some() {
                return None;
            }
        }
    }
    Some((out, derived))
}

/// `q.c` as (q, c), folded.
fn qualified(e: &Expr) -> Option<(String, String)> {
    match e {
        Expr::CompoundIdentifier(p) if p.len() == 2 => Some((fold(&p[0]), fold(&p[1]))),
        _ => None,
    }
}

/// Qualified columns used in the ON of a join of this SELECT.
fn used_in_on(from: &[TableWithJoins]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for j in from.iter().flat_map(|t| &t.joins) {
        if let Some(JoinConstraint::On(e)) = constraint(&j.join_operator) {
            let _ = sqlparser::ast::visit_expressions(e, |x| {
                out.extend(qualified(x));
                ControlFlow::<()>::Continue(())
            });
        }
    }
    out
}

fn constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c) => Some(c),
        _ => None,
    }
}

/// Whether `fk` points to a column that is one row of its table: the table's one-column primary
/// key, or a key profiling found unique (an inferred relationship always points to one).
fn to_one(fk: &ForeignKey, parent: &Table) -> bool {
    fk.inferred || (!parent.key_inferred && parent.primary_key.len() == 1 && parent.columns.iter().any(|c| c.ident == fk.ref_columns[0] && c.name == parent.primary_key[0]))
}

/// The single-column foreign keys of `table` whose referenced table (another) has `column`.
fn keys_to<'a>(schema: &'a Schema, table: &Table, column: &str) -> Vec<(&'a ForeignKey, &'a Table)> {
    schema
        .foreign_keys
        .iter()
        .filter(|fk| fk.table == table.ident && fk.columns.len() == 1 && fk.ref_columns.len() == 1)
        .filter_map(|fk| schema.tables.iter().find(|u| u.ident == fk.ref_table).map(|u| (fk, u)))
        .filter(|(_, u)| u.oid != table.oid && u.has_column(column))
        .collect()
}

/// The one key of `table` (to one row) whose referenced table has `column`.
fn the_key<'a>(schema: &'a Schema, table: &Table, column: &str) -> Option<(&'a ForeignKey, &'a Table)> {
    let mut found = keys_to(schema, table, column).into_iter().filter(|(fk, u)| to_one(fk, u));
    match (found.next(), found.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// For `qualifier.column` where no foreign key links the qualifier's table `qt` with a table
/// that has the column, either way round (`p.drug_name`, p patients, in `FROM patients p JOIN
/// treatments t ...`, treatments.drug_id -> drugs): the one table of the SELECT that foreign
/// keys among the SELECT's tables link with `qt` and that has the one key (to one row) to such
/// a table, as its FROM entry, the name it is referred to by, the key and the table. None
/// where several tables or keys could be meant, or no such table is linked with `qt` (a cross
/// join, `ON true`: nothing says the rows belong together).
fn through_another<'a>(schema: &'a Schema, own: &HashMap<String, (usize, usize)>, (qualifier, qt): (&str, usize), column: &str) -> Option<(usize, String, &'a ForeignKey, &'a Table)> {
    let table = &schema.tables[qt];
    let holds = |ident: &str| schema.tables.iter().any(|u| u.ident == ident && u.oid != table.oid && u.has_column(column));
    if schema.foreign_keys.iter().any(|fk| (fk.table == table.ident && holds(&fk.ref_table)) || (fk.ref_table == table.ident && holds(&fk.table))) {
        return None;
    }
    let linked = linked_with(schema, own, qt);
    let mut found = Vec::new();
    for (by, &(item, t)) in own.iter().filter(|(by, &(_, t))| by.as_str() != qualifier && linked.contains(&t)) {
        for (fk, parent) in keys_to(schema, &schema.tables[t], column) {
            found.push((item, by.clone(), fk, parent));
        }
    }
    if found.len() == 1 && to_one(found[0].2, found[0].3) {
        found.pop()
    } else {
        None
    }
}

/// The tables of the SELECT (indexes into the schema's) that foreign keys between tables of
/// the SELECT link with `start`, directly or through others of them.
fn linked_with(schema: &Schema, own: &HashMap<String, (usize, usize)>, start: usize) -> Vec<usize> {
    let tables: Vec<usize> = own.values().map(|&(_, t)| t).collect();
    let mut reached = vec![start];
    let mut i = 0;
    while i < reached.len() {
        let at = &schema.tables[reached[i]].ident;
        for &t in &tables {
            let other = &schema.tables[t].ident;
            let link = schema.foreign_keys.iter().any(|fk| (fk.table == *at && fk.ref_table == *other) || (fk.table == *other && fk.ref_table == *at));
            if link && !reached.contains(&t) {
                reached.push(t);
            }
        }
        i += 1;
    }
    reached
}

/// For `qualifier.column` where the qualifier is no name the statement declares but the name of
/// a table on the search path that has the column (`singer.name` in `FROM singer_in_concert
/// JOIN concert ...`): the one table of the SELECT with the one foreign key to it (to one row),
/// as (its FROM entry, the name it is referred to by, the key, the table). None where the name
/// is declared anywhere in the statement (an enclosing query's, a CTE), several tables of that
/// name or several keys could be meant, or the table is one of the SELECT's already.
fn undeclared<'a>(schema: &'a Schema, sc: &Scope, own: &HashMap<String, (usize, usize)>, qualifier: &str, column: &str) -> Option<(usize, String, &'a ForeignKey, &'a Table)> {
    if sc.names.contains_key(qualifier) || sc.other.iter().any(|o| o == qualifier) {
        return None;
    }
    let mut named = schema.tables.iter().filter(|t| t.name == qualifier && on_search_path(&t.ident));
    let parent = match (named.next(), named.next()) {
        (Some(p), None) if p.has_column(column) => p,
        _ => return None,
    };
    if own.values().any(|&(_, t)| schema.tables[t].oid == parent.oid) {
        return None;
    }
    let mut found = Vec::new();
    for (by, &(item, t)) in own {
        let table = &schema.tables[t];
        for fk in schema.foreign_keys.iter().filter(|fk| fk.table == table.ident && fk.ref_table == parent.ident) {
            if fk.columns.len() == 1 && fk.ref_columns.len() == 1 && to_one(fk, parent) {
                found.push((item, by.clone(), fk, parent));
            }
        }
    }
    match found.len() {
        1 => found.pop(),
        _ => None,
    }
}

/// A LEFT JOIN of `parent` on `by.key = parent.referenced`, parsed (identifiers as the schema
/// spells them, quoted where needed).
fn left_join(parent: &Table, by: &str, fk: &ForeignKey) -> Option<Join> {
    let text = format!(
        "SELECT 1 FROM x LEFT JOIN {} ON {}.{} = {}.{}",
        parent.ident,
        ident(by),
        fk.columns[0],
        ident(&parent.name),
        fk.ref_columns[0]
    );
    parsed_joins(&text).into_iter().next()
}

fn one_select(schema: &Schema, sc: &Scope, s: &mut Select, order_by: &mut Option<sqlparser::ast::OrderBy>, fired: &mut Vec<String>) {
    // `*` would return the joined table's columns too.
    if s.projection.iter().any(|p| matches!(p, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..))) {
        return;
    }
    let Some((own, derived)) = own_tables(schema, sc, &s.from) else { return };
    // What this SELECT (and its ORDER BY) writes as q.c, outside subqueries.
    let mut written: Vec<(String, String)> = Vec::new();
    top_level_exprs(&mut *s, |e| written.extend(qualified(e)));
    if let Some(ob) = order_by.as_mut() {
        top_level_exprs(ob, |e| written.extend(qualified(e)));
    }
    let on = used_in_on(&s.from);
    // Unqualified names anywhere in the SELECT, subqueries included: a joined table having one
    // would capture it from the table or enclosing query it now refers to.
    let mut bare: Vec<String> = Vec::new();
    let _ = sqlparser::ast::visit_expressions(&*s, |e| {
        match e {
            Expr::Identifier(i) => bare.push(fold(i)),
            Expr::CompoundIdentifier(p) if !p.is_empty() => bare.push(fold(&p[0])),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    if let Some(ob) = order_by.as_ref() {
        let _ = sqlparser::ast::visit_expressions(ob, |e| {
            if let Expr::Identifier(i) = e {
                bare.push(fold(i));
            }
            ControlFlow::<()>::Continue(())
        });
    }
    // (qualifier, column) -> the name of the table that has it, joined.
    let mut moved: HashMap<(String, String), String> = HashMap::new();
    let mut joins: Vec<(usize, Join)> = Vec::new();
    let mut joined: HashMap<(String, String, u32), String> = HashMap::new();
    for (n, (qualifier, column)) in written.into_iter().enumerate() {
        crate::interrupt::every(n, 16);
        if moved.contains_key(&(qualifier.clone(), column.clone())) || on.contains(&(qualifier.clone(), column.clone())) {
            continue;
        }
        if sc.other.contains(&column) || derived.contains(&column) || own.values().any(|&(_, u)| schema.tables[u].has_column(&column)) {
            continue;
        }
        // Written with a table of the SELECT that lacks the column, or with the name of a table
        // the statement never declares that one of them has a key to.
        let (item, by, fk, parent) = match own.get(&qualifier) {
            Some(&(item, t)) => match the_key(schema, &schema.tables[t], &column) {
                Some((fk, parent)) => (item, qualifier.clone(), fk, parent),
                None => match through_another(schema, &own, (&qualifier, t), &column) {
                    Some(found) => found,
                    None => continue,
                },
            },
            None => match undeclared(schema, sc, &own, &qualifier, &column) {
                Some(found) => found,
                None => continue,
            },
        };
        // (A qualifier naming the undeclared table is the column this join is for.)
        if bare.iter().any(|b| (*b == parent.name && *b != qualifier) || parent.has_column(b)) {
            continue;
        }
        // One join per key followed, named after the parent's table.
        let key = (by.clone(), fk.columns[0].clone(), parent.oid);
        let name = match joined.get(&key) {
            Some(n) => n.clone(),
            None => {
                let n = parent.name.clone();
                if joins.len() >= MAX_JOINS || own.contains_key(&n) || sc.names.contains_key(&n) || sc.other.contains(&n) || joined.values().any(|x| *x == n) {
                    continue;
                }
                let Some(join) = left_join(parent, &by, fk) else { continue };
                joins.push((item, join));
                joined.insert(key, n.clone());
                fired.push(format!("agent: {} joined on {}.{} for {}.{}", parent.ident, by, fk.columns[0], qualifier, column));
                n
            }
        };
        moved.insert((qualifier, column), name);
    }
    if moved.is_empty() {
        return;
    }
    let mut requalify = |e: &mut Expr| {
        let Some(k) = qualified(e) else { return };
        if let (Some(owner), Expr::CompoundIdentifier(p)) = (moved.get(&k), e) {
            p[0] = ident(owner);
        }
    };
    top_level_exprs(&mut *s, &mut requalify);
    if let Some(ob) = order_by.as_mut() {
        top_level_exprs(ob, &mut requalify);
    }
    for (item, join) in joins {
        if let Some(twj) = s.from.get_mut(item) {
            twj.joins.push(join);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::align::{align, Context, Rules};
    use crate::schema::tests::star_schema;

    use crate::align::NoValues as Nothing;

    fn run(sql: &str) -> crate::align::Aligned {
        align(sql, &star_schema(), Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE })
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
            assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{sql}: {:?} -> {}", a.fired, a.sql);
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
            "SELECT s.capacity FROM singer AS s JOIN concert AS c ON true JOIN concert AS d ON true",
            // A derived table named like the table that would be joined.
            "SELECT s.capacity FROM singer AS s JOIN concert AS c ON true JOIN (SELECT 1 AS k) AS stadium ON true",
            // A derived table with renamed columns, or a function, in the FROM.
            "SELECT s.capacity FROM singer AS s JOIN concert AS c ON true JOIN (SELECT 1) AS d(k) ON true",
            "SELECT s.capacity FROM singer AS s JOIN concert AS c ON true JOIN generate_series(1, 2) AS g ON true",
            // A bare name the joined table has (name) would be captured from singer.
            "SELECT name, s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
             JOIN concert AS c ON x.concert_id = c.concert_id",
            // No key links the two tables: nothing says a singer's row belongs with a concert's.
            "SELECT s.capacity FROM singer AS s JOIN concert AS c ON true",
            "SELECT s.capacity FROM singer AS s, concert AS c WHERE c.year = 2014",
            // A derived table returns a column of that name (known, or through `*`).
            "SELECT x.name FROM singer_in_concert AS x JOIN concert AS c ON c.concert_id = x.concert_id \
             JOIN (SELECT st.stadium_id, st.name FROM stadium AS st) AS v ON v.stadium_id = c.stadium_id",
            "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
             JOIN concert AS c ON x.concert_id = c.concert_id JOIN (SELECT * FROM stadium) AS v ON true",
        ];
        for sql in unchanged {
            let a = run(sql);
            assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{sql}: {:?} -> {}", a.fired, a.sql);
        }
        // The qualifier's own table has a key to one with it that is not known to be unique:
        // no other table's key is taken instead.
        let mut s = star_schema();
        s.tables.push(serde_json::from_value(crate::schema::tests::table_json(9, "arena", &["capacity"], &[])).expect("table"));
        s.foreign_keys.push(serde_json::from_value(serde_json::json!(
            {"table": "singer", "columns": ["age"], "ref_table": "arena", "ref_columns": ["capacity"]})).expect("fk"));
        let sql = "SELECT s.capacity FROM singer AS s JOIN singer_in_concert AS x ON s.singer_id = x.singer_id \
                   JOIN concert AS c ON x.concert_id = c.concert_id";
        assert!(run(sql).fired.iter().any(|f| f.contains("joined on")), "{sql}");
        let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
        assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{:?} -> {}", a.fired, a.sql);
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
            assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{sql}: {:?} -> {}", a.fired, a.sql);
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
            assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{sql}: {:?} -> {}", a.fired, a.sql);
        }
        // Two keys of the one table to it.
        let mut s = star_schema();
        s.foreign_keys.push(serde_json::from_value(serde_json::json!(
            {"table": "concert", "columns": ["year"], "ref_table": "stadium", "ref_columns": ["stadium_id"]})).expect("fk"));
        let a = align("SELECT stadium.capacity FROM concert AS c", &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
        assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{:?}", a.fired);
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
        assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{:?}", a.fired);
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
        assert!(!a.fired.iter().any(|f| f.contains("joined on")), "{:?}", a.fired);
        // ... unless profiling inferred it (it points to a key found unique).
        s.foreign_keys[0].inferred = true;
        let a = align(sql, &s, Context::default(), &mut Nothing, Rules { agent: true, ..Rules::NONE });
        assert!(a.sql.contains("LEFT JOIN stadium ON c.stadium_id = stadium.stadium_id"), "{}", a.sql);
    }
}
