//! Building a column's value index: a new generation of entries loaded beside the one serving
//! searches, its btree and HNSW indexes, the values DML added meanwhile, then the switch of
//! value_index.generation. The generation replaced stays until no snapshot can use it
//! (refresh.rs drops it). Also the triggers, and dropping an index.

use super::{entries_table, fail, may_maintain, printed, relation_text, Built};
use crate::gucs;
use crate::pg::relation::Trigger;
use crate::pg::{embedder, errors, owner, relation, spi};
use nl2sql_core::prompt::refine::Failure;
use nl2sql_core::retrieval::embed;
use nl2sql_core::retrieval::embedder::Embedder;
use nl2sql_core::error::SqlState;
use nl2sql_core::retrieval::lookup;
use pgrx::prelude::*;
use pgrx::spi::quote_identifier;
use std::time::Instant;

/// Values read from a user's table at a time (as the table's owner) before they are stored
/// (as the extension's owner).
const READ_CHUNK: i64 = 20_000;

struct Column {
    attnum: i16,
    name: String,
}

const SCHEMA_TABLES_SQL: &str = include_str!("../../../sql/queries/value_index_tables.sql");

/// Indexes every table of `schemas` ([`create`] for each: a table with row-level security and
/// no include_rls skipped with a NOTICE, one whose owner's code fails the read with a WARNING).
pub fn create_in_schemas(schemas: Vec<String>, include_rls: bool) -> Vec<Built> {
    let tables: Vec<pg_sys::Oid> = spi::rows(SCHEMA_TABLES_SQL, &[schemas.into()], |r| r.get::<pg_sys::Oid>(1).ok()?);
    let mut built = Vec::new();
    for t in tables {
        check_for_interrupts!();
        // Dropped since the list was read: nothing to index.
        let Some(name) = relation::display_name(t) else { continue };
        // One table that its owner's code keeps from being read (a policy of hers that raises,
        // under include_rls) must not undo the indexes of every other one: as a refresh does, it
        // is skipped with a WARNING that quotes nothing of hers. nl2sql's own errors (a refusal,
        // a read-only transaction, an embedding endpoint that does not answer) end the call as
        // they would for one table; so does a cancel, statement_timeout's included, also when
        // her code caught it.
        let failed = owner::owner_reads_failed();
        let indexed = crate::pg::sandbox::kept_within(None, || index(t, None, include_rls, false, true));
        let hers = matches!(&indexed, Err(Failure::Execution(r) | Failure::Analysis(r)) if owner::ended_owner_read(&r.message, failed, errors::message_shown));
        owner::passed_over();
        match indexed {
            Ok(b) => built.extend(b),
            Err(Failure::Execution(r) | Failure::Analysis(r)) if !hers => errors::raise(&r),
            Err(_) => alert!(
                "nl2sql could not read table {} as its owner; its values are not indexed",
                nl2sql_core::render::ident(&name)
            ),
        }
    }
    built
}

/// Indexes the text columns of `rel` (or the one named), first dropping the generations builds
/// replaced ([`super::refresh::collect_garbage`]). `explicit`: the caller named this table, so
/// refusals are errors; otherwise they are NOTICEs and the column is skipped.
/// Her table's code runs in the caller's statement: a cancel it catches still ends it, and
/// her error is raised as nl2sql's naming her table ([`super::in_named_read`]).
pub fn create(rel: pg_sys::Oid, column: Option<&str>, include_rls: bool, explicit: bool) -> Vec<Built> {
    super::in_named_read(rel, || index(rel, column, include_rls, explicit, true))
}

/// A refresh's rebuild of `rel`'s `column`: [`create`], but reading no other table (the
/// refresh collected the old generations first), so that a refresh bounding each table's
/// rebuild charges each table only its own time.
pub(super) fn rebuild(rel: pg_sys::Oid, column: &str, include_rls: bool) -> Vec<Built> {
    index(rel, Some(column), include_rls, false, false)
}

fn index(rel: pg_sys::Oid, column: Option<&str>, include_rls: bool, explicit: bool, collect: bool) -> Vec<Built> {
    let relname = relation_text(rel);
    let (relkind, rls, temporary) = spi::read_row(
        "SELECT c.relkind::text, c.relrowsecurity, c.relpersistence OPERATOR(pg_catalog.=) 't'
         FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
        &[rel.into()],
        |r| Some((r.get::<String>(1).ok()??, r.get::<bool>(2).ok()??, r.get::<bool>(3).ok()??)),
    )
    .unwrap_or_else(|| fail(SqlState::UndefinedTable, format!("relation {relname} does not exist"), None));
    let caller = owner::caller();
    if !may_maintain(rel, caller) {
        fail(SqlState::InsufficientPrivilege, format!("must be owner of table {relname} to index its values"), None);
    }
    if !matches!(relkind.as_str(), "r" | "p" | "m") {
        fail(SqlState::from_code("42809"), format!("{relname} is not a table or materialized view"), None);
    }
    if temporary {
        // The index would outlive the session's table, and pg_dump could not name it.
        fail(SqlState::FeatureNotSupported, format!("cannot index the values of temporary table {relname}"), Some("Index a permanent table."));
    }
    if rls && !include_rls {
        let msg = format!("table {relname} has row-level security; its values are not indexed");
        if explicit {
            fail(
                SqlState::ObjectNotInPrerequisiteState,
                msg,
                Some("An index of values ignores row policies. nl2sql re-checks every value it returns against the table as the caller when you opt in with include_rls => true."),
            );
        }
        note!("{msg}");
        return vec![];
    }
    let columns = text_columns(rel, column);
    if let Some(c) = column {
        if columns.is_empty() {
            let exists = spi::read::<bool>(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid OPERATOR(pg_catalog.=) $1
                 AND attname OPERATOR(pg_catalog.=) $2 AND attnum > 0 AND NOT attisdropped)",
                &[rel.into(), c.into()],
            )
            .unwrap_or(false);
            if exists {
                fail(SqlState::from_code("42804"), format!("column \"{}\" of {relname} is not a text column", nl2sql_core::render::visible(c, false)), Some("Only text, varchar, char, citext, enum and other string types are indexed."));
            }
            fail(SqlState::from_code("42703"), format!("column \"{}\" of relation {relname} does not exist", nl2sql_core::render::visible(c, false)), None);
        }
    }
    if collect {
        super::refresh::collect_garbage(&mut super::TableClock::new());
    }
    let (function, strong) = owner::as_owner(|| {
        let function = values_changed();
        (function, relkind != "m" && needs_dml_to_wait(rel, &columns, function))
    });
    let target = Target { rel, relname: &relname, relkind: &relkind, caller, strong, function };
    let mut out = Vec::new();
    for col in &columns {
        check_for_interrupts!();
        if let Some(b) = owner::as_owner(|| build_column(&target, col, include_rls, explicit && column.is_some())) {
            out.push(b);
        }
    }
    out
}

/// The table a build works on.
struct Target<'a> {
    rel: pg_sys::Oid,
    relname: &'a str,
    relkind: &'a str,
    /// Who asked: checked again once the table is locked.
    caller: pg_sys::Oid,
    /// DML waits for this build (a column without a generation serving, a trigger missing).
    strong: bool,
    /// `nl2sql._values_changed()`, the function nl2sql's triggers call.
    function: pg_sys::Oid,
}

/// Whether a build of `columns` makes DML wait: one of them has no generation serving yet (a
/// first build, or restored), or a trigger is missing. Decided once for the table, so that its
/// lock is taken at its strongest by the first column and never raised.
fn needs_dml_to_wait(rel: pg_sys::Oid, columns: &[Column], function: pg_sys::Oid) -> bool {
    let attnums: Vec<i16> = columns.iter().map(|c| c.attnum).collect();
    let serving = spi::read::<i64>(
        "SELECT pg_catalog.count(*) FROM nl2sql.value_index i WHERE i.relid::pg_catalog.oid = $1
         AND i.attnum = ANY ($2::pg_catalog.int2[]) AND nl2sql._entries(i.id, i.generation) IS NOT NULL",
        &[rel.into(), attnums.into()],
    )
    .unwrap_or(0);
    serving < columns.len() as i64 || TRIGGERS.iter().any(|(name, _)| !relation::trigger(rel, name, function).is_nl2sqls())
}

/// Locks the table after its column's value_index row (sql/values.sql, the order of locks),
/// to the end of the transaction: it is neither dropped nor renamed while it is read (its
/// schema may be renamed: the reads take its name through relation::by_name). A first build
/// makes DML wait, as CREATE INDEX does, or the values DML adds between the read and this
/// transaction's end would be lost (there is no generation yet for the triggers to write to);
/// so does making triggers someone dropped. Otherwise what a SELECT takes: rebuilds never
/// block DML. Then checks that the caller may still maintain the table (its owner may have
/// changed while the build waited) and makes the triggers that are missing.
fn lock_table(t: &Target, serving: bool) {
    let triggers = t.relkind != "m";
    let mode = if triggers && (t.strong || !serving) { pg_sys::ShareRowExclusiveLock } else { pg_sys::AccessShareLock };
    if !relation::lock_existing(t.rel, mode) {
        fail(SqlState::UndefinedTable, format!("relation {} does not exist", t.relname), None);
    }
    if !may_maintain(t.rel, t.caller) {
        fail(SqlState::InsufficientPrivilege, format!("must be owner of table {} to index its values", t.relname), None);
    }
    if triggers {
        ensure_triggers(t);
    }
}

fn text_columns(rel: pg_sys::Oid, only: Option<&str>) -> Vec<Column> {
    spi::rows(
        include_str!("../../../sql/queries/values_build_text_columns.sql"),
        &[rel.into(), only.into()],
        |r| Some(Column { attnum: r.get::<i16>(1).ok()??, name: r.get::<String>(2).ok()?? }),
    )
}

/// A column's value_index row, locked for this build.
struct Claim {
    id: i32,
    /// The generation serving (or, restored, the one the dump named).
    generation: i32,
    /// The row is this build's own: a skipped build removes it.
    new: bool,
    /// The generation's entries exist: false for a new row and for one pg_restore brought back
    /// without them, which is built as a first build is.
    serving: bool,
}

/// The column's value_index row, locked for this build. None when another session is building
/// or refreshing it.
fn claim(rel: pg_sys::Oid, col: &Column) -> Option<Claim> {
    let emb = embedder::current().id();
    let max_len = gucs::index_max_value_length();
    if let Some(id) = spi::write_one::<i32>(
        "INSERT INTO nl2sql.value_index (relid, attnum, attname, embedder, dims, status, max_length)
         VALUES ($1, $2, $3, $4, 256, 'building', $5) ON CONFLICT (relid, attnum) DO NOTHING RETURNING id",
        &[rel.into(), col.attnum.into(), col.name.as_str().into(), emb.as_str().into(), max_len.into()],
    ) {
        return Some(Claim { id, generation: 0, new: true, serving: false });
    }
    // Never waits: a build beside another build of the same column has nothing to add. (DML
    // holds FOR KEY SHARE locks on the row through the foreign keys of the queues; this lock
    // does not conflict with them.)
    spi::write_row(
        "SELECT id, generation, nl2sql._entries(id, generation) IS NOT NULL FROM nl2sql.value_index
         WHERE relid::pg_catalog.oid = $1 AND attnum = $2 FOR NO KEY UPDATE SKIP LOCKED",
        &[rel.into(), col.attnum.into()],
        |r| Some(Claim { id: r.get::<i32>(1).ok()??, generation: r.get::<i32>(2).ok()??, new: false, serving: r.get::<bool>(3).ok()?? }),
    )
}

/// Builds one column's index as a new generation. None when it is skipped (NOTICE).
fn build_column(t: &Target, col: &Column, include_rls: bool, explicit: bool) -> Option<Built> {
    let (rel, relname) = (t.rel, t.relname);
    let started = Instant::now();
    let qcol = quote_identifier(&col.name);
    let shown = format!("{relname}.{}", relation::display_ident(&col.name));
    let Some(Claim { id, generation: old_gen, new, serving }) = claim(rel, col) else {
        let msg = format!("the value index of {shown} is being built by another session");
        if explicit {
            fail(SqlState::from_code("55P03"), msg, Some("Try again when that build has finished."));
        }
        note!("{msg}; skipped");
        return None;
    };
    lock_table(t, serving);
    // The name was read by the transaction's snapshot, which under REPEATABLE READ may be from
    // before a rename: spliced, it would read another of the table's columns. Now that renames
    // wait for the lock, the name must be the column's as committed.
    if relation::column_name(rel, col.attnum).as_deref() != Some(col.name.as_str()) {
        fail(
            SqlState::from_code("40001"),
            format!("column {} of {relname} was renamed or dropped while nl2sql read it", relation::display_ident(&col.name)),
            Some("Try again: the index is built from the column's current name."),
        );
    }
    let max_len = gucs::index_max_value_length();
    let (distinct, avg_len, too_long) = shape(rel, &qcol, max_len);
    let skip = |why: String| -> Option<Built> {
        if new {
            spi::write("DELETE FROM nl2sql.value_index WHERE id = $1", &[id.into()]);
        } else if !serving {
            // Restored, and not buildable as it is: stale (shown so, no longer named by searches).
            spi::write("UPDATE nl2sql.value_index SET status = 'stale' WHERE id = $1", &[id.into()]);
        }
        let msg = format!("column {shown} is not indexed: {why}");
        if explicit {
            fail(SqlState::ProgramLimitExceeded, msg, Some("Raise nl2sql.index_max_distinct or nl2sql.index_max_avg_length to index it."));
        }
        note!("{msg}");
        None
    };
    if distinct > gucs::index_max_distinct() {
        return skip(format!("{distinct} distinct values, more than nl2sql.index_max_distinct"));
    }
    if avg_len > gucs::index_max_avg_length() as f64 {
        return skip(format!("free text (average length {avg_len:.0}, more than nl2sql.index_max_avg_length)"));
    }
    let emb = embedder::for_stored_values();
    let generation = if new { 0 } else { old_gen + 1 };
    let table = entries_table(id, generation);
    // The marks this build answers: those set before it reads the table.
    let flags: Vec<i64> = spi::rows("SELECT id FROM nl2sql.value_flags WHERE column_id = $1", &[id.into()], |r| r.get::<i64>(1).ok()?);
    spi::write(&format!("CREATE TABLE {table} (LIKE nl2sql.value_entries INCLUDING ALL)"), &[]);
    // A member of the extension: DROP EXTENSION drops it; pg_dump leaves it out (a restore rebuilds).
    spi::write(&format!("ALTER EXTENSION nl2sql ADD TABLE {table}"), &[]);
    note!("nl2sql: indexing {shown}: {distinct} distinct values");

    let (mut values, phrases, dims) = relation::by_name(rel, |name| {
        // As bytes: a value that is not UTF-8 (a SQL_ASCII database holds any bytes) is left
        // out of the index (stream_values), not the end of the build.
        let source = format!(
            "SELECT pg_catalog.convert_to(v, pg_catalog.getdatabaseencoding())
             FROM (SELECT DISTINCT v FROM (SELECT {} AS v FROM {name} WHERE {qcol} IS NOT NULL) s
                   WHERE pg_catalog.length(v) BETWEEN 1 AND {max_len}) d",
            printed(&qcol)
        );
        match &emb {
            Embedder::Builtin => load_builtin(&table, rel, &source),
            Embedder::Remote(ep) => load_remote(&table, rel, &source, ep),
        }
    });
    let loaded = started.elapsed().as_secs_f64();
    let big = values + phrases > 100_000;
    if big {
        note!("nl2sql: {shown}: {values} values and {phrases} phrases loaded in {loaded:.1} s; building its indexes");
    }
    spi::write(&format!("CREATE INDEX ON {table} (key)"), &[]);
    // Byte order, forwards and backwards: a mistyped key's neighbours share the part before
    // the typo or the part after it (search reads a few either side).
    spi::write(&format!("CREATE INDEX ON {table} (key COLLATE \"C\")"), &[]);
    spi::write(&format!("CREATE INDEX ON {table} ((pg_catalog.reverse(key)) COLLATE \"C\")"), &[]);
    let keyed = started.elapsed().as_secs_f64();
    build_hnsw(&table, dims);
    let hnsw = started.elapsed().as_secs_f64();
    if serving {
        // What DML added to the generation serving while this one was loaded.
        values += super::entries::catch_up(id, rel, col.attnum, &entries_table(id, old_gen), &table, &emb, &mut super::TableClock::new());
    }
    spi::write(&format!("ANALYZE {table}"), &[]);
    let seconds = started.elapsed().as_secs_f64();
    if big {
        note!(
            "nl2sql: {shown} indexed in {seconds:.1} s (load {loaded:.1} s, key btrees {:.1} s, HNSW {:.1} s)",
            keyed - loaded,
            hnsw - keyed
        );
    }
    // The switch: searches whose snapshot sees this commit use the new generation.
    spi::write(
        include_str!("../../../sql/queries/values_build_publish.sql"),
        &[
            id.into(),
            generation.into(),
            emb.id().as_str().into(),
            dims.into(),
            values.into(),
            phrases.into(),
            too_long.into(),
            include_rls.into(),
            max_len.into(),
            (seconds * 1000.0).into(),
            col.name.as_str().into(),
        ],
    );
    clear_behind(id, serving.then_some(old_gen), flags, &table, &emb);
    Some(Built { relid: rel, column: col.name.clone(), status: "ready".into(), values, phrases, skipped: too_long, seconds })
}

/// A column's distinct values, their average length, and how many are longer than `max_len`;
/// the user's table is read as its owner, in a restricted context (owner.rs).
fn shape(rel: pg_sys::Oid, qcol: &str, max_len: i32) -> (i64, f64, i64) {
    let sql = |relname: &str| {
        format!(
            "SELECT pg_catalog.count(DISTINCT v)::int8, coalesce(pg_catalog.avg(pg_catalog.length(v)), 0)::float8,
                    pg_catalog.count(DISTINCT v) FILTER (WHERE pg_catalog.length(v) > {max_len})::int8
             FROM (SELECT {} AS v FROM {relname}) s",
            printed(qcol)
        )
    };
    relation::by_name(rel, |relname| {
        owner::as_table_owner(rel, || {
            spi::read_row(&sql(relname), &[], |r| {
                Some((r.get::<i64>(1).ok()?.unwrap_or(0), r.get::<f64>(2).ok()?.unwrap_or(0.0), r.get::<i64>(3).ok()?.unwrap_or(0)))
            })
        })
    })
    .unwrap_or((0, 0.0, 0))
}

/// After the switch to a new generation: the one it replaced (`retired`) waits for the
/// snapshots that may still read it, the marks the build answered are cleared, and so are the
/// queued values the new generation holds embedded (with the built-in embedder none wait).
fn clear_behind(id: i32, retired: Option<i32>, flags: Vec<i64>, table: &str, emb: &Embedder) {
    if let Some(old_gen) = retired {
        spi::write(
            "INSERT INTO nl2sql.value_generations (column_id, generation, retired_xid)
             VALUES ($1, $2, pg_catalog.pg_current_xact_id()::text::int8) ON CONFLICT DO NOTHING",
            &[id.into(), old_gen.into()],
        );
    }
    spi::write("DELETE FROM nl2sql.value_flags WHERE id = ANY ($1)", &[flags.into()]);
    spi::write(
        &format!(
            "DELETE FROM nl2sql.value_queue q WHERE q.column_id = $1
               AND ($2 OR EXISTS (SELECT 1 FROM {table} e WHERE e.key = nl2sql.fold(q.value) AND e.value = q.value))"
        ),
        &[id.into(), matches!(emb, Embedder::Builtin).into()],
    );
}

/// Reads the values `source` selects from `rel` (as bytes) as the table's owner, a chunk at a
/// time, and hands each chunk's UTF-8 ones to `store`, which runs as the extension's owner.
/// Returns how many were handed.
fn stream_values(rel: pg_sys::Oid, source: &str, mut store: impl FnMut(&mut pgrx::spi::SpiClient<'_>, Vec<String>)) -> i64 {
    Spi::connect_mut(|client| {
        let name = owner::as_table_owner(rel, || client.open_cursor(source, &[]).detach_into_name());
        let mut total = 0i64;
        loop {
            check_for_interrupts!();
            let rows: Vec<Option<Vec<u8>>> = owner::as_table_owner(rel, || {
                let mut cursor = client.find_cursor(&name).unwrap_or_else(|e| fail(SqlState::InternalError, format!("{e}"), None));
                let rows = cursor.fetch(READ_CHUNK).map(|t| t.map(|r| r.get::<Vec<u8>>(1).ok().flatten()).collect()).unwrap_or_default();
                cursor.detach_into_name();
                rows
            });
            if rows.is_empty() {
                break;
            }
            let chunk: Vec<String> = rows.into_iter().filter_map(|b| String::from_utf8(b?).ok()).collect();
            total += chunk.len() as i64;
            if !chunk.is_empty() {
                store(client, chunk);
            }
        }
        if let Ok(cursor) = client.find_cursor(&name) {
            std::mem::drop(cursor); // closes it
        }
        total
    })
}

/// The built-in embedder: each value with its signature, then the phrases few enough values
/// share ([`lookup::phrase_cap`]), counted over the whole column in one statement.
fn load_builtin(table: &str, rel: pg_sys::Oid, source: &str) -> (i64, i64, i32) {
    let insert = format!(
        "INSERT INTO {table} (value, term, key, sig)
         SELECT v, v, nl2sql.fold(v), nl2sql.signature(v)::bit(256) FROM pg_catalog.unnest($1::pg_catalog.text[]) AS v"
    );
    let values = stream_values(rel, source, |client, chunk| {
        if let Err(e) = client.update(insert.as_str(), None, &[chunk.into()]) {
            fail(SqlState::InternalError, format!("nl2sql internal query failed: {e}"), None);
        }
    });
    let cap = lookup::phrase_cap(values as usize);
    let phrases = spi::write_one::<i64>(
        &format!(
            "WITH ph AS (SELECT e.value AS v, p FROM {table} e, pg_catalog.unnest(nl2sql.phrases(e.value)) p),
                  ok AS (SELECT p FROM ph GROUP BY p HAVING pg_catalog.count(*) <= {cap}),
                  ins AS (INSERT INTO {table} (value, term, key, sig)
                          SELECT ph.v, ph.p, ph.p, nl2sql.signature(ph.p)::bit(256) FROM ph JOIN ok USING (p) RETURNING 1)
             SELECT pg_catalog.count(*) FROM ins"
        ),
        &[],
    )
    .unwrap_or(0);
    (values, phrases, embed::SIGNATURE_BITS as i32)
}

fn load_remote(table: &str, rel: pg_sys::Oid, source: &str, ep: &nl2sql_core::model::http::Endpoint) -> (i64, i64, i32) {
    let mut values: Vec<String> = Vec::new();
    stream_values(rel, source, |_, chunk| values.extend(chunk));
    let rows = lookup::entries(&values);
    let phrases = rows.iter().filter(|(v, t)| v != t).count() as i64;
    let dims = super::entries::insert_remote(table, ep, &rows);
    (values.len() as i64, phrases, dims)
}

fn build_hnsw(table: &str, dims: i32) {
    let old_mb = spi::read::<i64>("SELECT pg_catalog.pg_size_bytes(pg_catalog.current_setting('maintenance_work_mem')) / 1048576", &[]).unwrap_or(0);
    let want = gucs::index_build_memory_mb() as i64;
    // Undone with as_owner's GUC nest level.
    if want > old_mb {
        spi::set_local(c"maintenance_work_mem", &format!("{want}MB"));
    }
    let (m, efc) = (gucs::index_hnsw_m(), gucs::index_hnsw_ef_construction());
    spi::write(
        &format!("CREATE INDEX ON {table} USING hnsw ((sig::bit({dims})) bit_hamming_ops) WITH (m = {m}, ef_construction = {efc})"),
        &[],
    );
}

const TRIGGERS: [(&str, &str); 4] = [
    ("nl2sql_values_insert", "AFTER INSERT ON {rel} REFERENCING NEW TABLE AS nl2sql_new"),
    ("nl2sql_values_update", "AFTER UPDATE ON {rel} REFERENCING OLD TABLE AS nl2sql_old NEW TABLE AS nl2sql_new"),
    ("nl2sql_values_delete", "AFTER DELETE ON {rel} REFERENCING OLD TABLE AS nl2sql_old"),
    ("nl2sql_values_truncate", "AFTER TRUNCATE ON {rel}"),
];

/// nl2sql's trigger function, `nl2sql._values_changed()` (a missing one raises: the input of
/// regprocedure does).
fn values_changed() -> pg_sys::Oid {
    spi::read::<pg_sys::Oid>("SELECT 'nl2sql._values_changed()'::pg_catalog.regprocedure::pg_catalog.oid", &[])
        .unwrap_or_else(|| fail(SqlState::InternalError, "nl2sql internal error: nl2sql._values_changed() is missing".into(), None))
}

/// Makes the triggers the table lacks. A trigger of one of their names that calls another
/// function (the table's owner's) is refused with 42710: taken for nl2sql's, the index would
/// miss the DML it does not report, and a drop would remove it.
fn ensure_triggers(t: &Target) {
    for (name, when) in TRIGGERS {
        match relation::trigger(t.rel, name, t.function) {
            Trigger::Calls(_) => {}
            Trigger::Other => fail(
                SqlState::from_code("42710"),
                format!("trigger \"{name}\" of {} is not nl2sql's", t.relname),
                Some("A value index keeps up with its table's changes through a trigger of that name; rename or drop that trigger, then build the index again."),
            ),
            Trigger::Missing => {
                // The ON clause is not read: the trigger is made on `rel` by OID.
                let when = when.replace("{rel}", "nl2sql.by_oid");
                relation::create_trigger(t.rel, &format!("CREATE TRIGGER {name} {when} FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._values_changed()"));
            }
        }
    }
}

/// Drops the value indexes of `rel` (or of one column); returns the columns dropped. Their
/// entries are retired like a replaced generation: searches running now finish with them.
pub fn drop(rel: pg_sys::Oid, column: Option<&str>) -> Vec<String> {
    let relname = relation_text(rel);
    let caller = owner::caller();
    let refused = || fail(SqlState::InsufficientPrivilege, format!("must be owner of table {relname} to drop its value index"), None);
    if !may_maintain(rel, caller) {
        refused();
    }
    owner::as_owner(|| {
        let dropped: Vec<String> = spi::write_rows(
            include_str!("../../../sql/queries/values_build_drop.sql"),
            &[rel.into(), column.into()],
            |r| r.get::<String>(1).ok()?,
        );
        let left = spi::read::<bool>("SELECT EXISTS (SELECT 1 FROM nl2sql.value_index WHERE relid::pg_catalog.oid = $1)", &[rel.into()]).unwrap_or(false);
        // The table after its value_index rows (the order of locks); the owner may have changed
        // while the DELETE waited for a build: checked again, and the DELETE undone if need be.
        // ACCESS EXCLUSIVE (DROP TRIGGER's) only where there are triggers to drop (a
        // materialized view has none).
        let function = values_changed();
        let drop_triggers = !left && TRIGGERS.iter().any(|(name, _)| relation::trigger(rel, name, function).is_nl2sqls());
        let mode = if drop_triggers { pg_sys::AccessExclusiveLock } else { pg_sys::AccessShareLock };
        if relation::lock_existing(rel, mode) && !may_maintain(rel, caller) {
            refused();
        }
        if drop_triggers {
            relation::drop_triggers(rel, &TRIGGERS.map(|(name, _)| name), function);
        }
        dropped
    })
}
