//! Value indexes over sql/values.sql's tables: build, drop, refresh, and search, plus the
//! schema embeddings' search. Builds run in the caller's transaction, so a cancel or an
//! endpoint failure leaves nothing half-built. Internal tables are read and written as the
//! extension owner; what is returned is filtered by the caller's privileges.

use crate::gucs;
use crate::pg::{embedder, errors, owner};
use nl2sql_core::embed;
use nl2sql_core::embedder::Embedder;
use nl2sql_core::error::{Report, SqlState};
use nl2sql_core::retrieve::{self, Candidate};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::{quote_identifier, OwnedPreparedStatement};
use pgrx::PgOid;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

thread_local! {
    /// The candidate query of each column's partition, prepared once per session: planning the
    /// same query over the partitioned table costs more than running it. Keyed by (column,
    /// signature bits, endpoint embedder, limit).
    static CANDIDATE_PLANS: RefCell<HashMap<(i32, usize, bool, i64), OwnedPreparedStatement>> = RefCell::new(HashMap::new());
}

/// A phrase shared by more than a tenth of a column's values (at least 2, at most 50) names
/// no value in particular ("airport" in a column of airport names) and is not indexed.
fn phrase_cap(values: usize) -> usize {
    (values / 10).clamp(2, 50)
}
/// Rows a batch when loading vectors from an endpoint.
const LOAD_CHUNK: usize = 5000;
/// Values read from a user's table at a time (as the table's owner) before they are stored
/// (as the extension's owner).
const READ_CHUNK: i64 = 20_000;

fn fail(state: SqlState, message: String, hint: Option<&str>) -> ! {
    let mut r = Report::new(state, message);
    if let Some(h) = hint {
        r = r.hint(h);
    }
    errors::raise(&r)
}

fn run(sql: &str, args: &[DatumWithOid]) {
    if let Err(e) = Spi::run_with_args(sql, args) {
        fail(SqlState::InternalError, format!("nl2sql internal query failed: {e}"), None)
    }
}

fn one<T: FromDatum + IntoDatum>(sql: &str, args: &[DatumWithOid]) -> Option<T> {
    Spi::get_one_with_args::<T>(sql, args)
        .unwrap_or_else(|e| fail(SqlState::InternalError, format!("nl2sql internal query failed: {e}"), None))
}

/// The relation's schema-qualified, quoted name: valid whatever the search_path.
fn relation_text(rel: pg_sys::Oid) -> String {
    one::<String>(
        "SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
        &[rel.into()],
    )
    .unwrap_or_else(|| fail(SqlState::UndefinedTable, format!("relation with OID {} does not exist", u32::from(rel)), None))
}

/// The relation's name as the schema prompt writes it: qualified only when not on the search_path.
pub fn visible_name(rel: pg_sys::Oid) -> String {
    one::<String>("SELECT $1::pg_catalog.regclass::text", &[rel.into()]).unwrap_or_default()
}

/// What one build did, one row of create_value_index()'s result.
pub struct Built {
    pub relid: pg_sys::Oid,
    pub column: String,
    pub status: String,
    pub values: i64,
    pub phrases: i64,
    pub skipped: i64,
    pub seconds: f64,
}

struct Column {
    attnum: i16,
    name: String,
}

/// Indexes the text columns of `rel` (or the one named). `explicit`: the caller named this
/// table, so refusals are errors; otherwise they are NOTICEs and the column is skipped.
pub fn create(rel: pg_sys::Oid, column: Option<&str>, include_rls: bool, explicit: bool) -> Vec<Built> {
    let relname = relation_text(rel);
    let (relkind, rls, may) = Spi::get_three_with_args::<String, bool, bool>(
        "SELECT c.relkind::text, c.relrowsecurity,
                pg_catalog.pg_has_role(c.relowner, 'USAGE') OR r.rolsuper
         FROM pg_catalog.pg_class c, pg_catalog.pg_roles r
         WHERE c.oid = $1 AND r.oid = $2",
        &[rel.into(), owner::caller().into()],
    )
    .ok()
    .and_then(|(k, r, m)| Some((k?, r?, m?)))
    .unwrap_or_else(|| fail(SqlState::UndefinedTable, format!("relation {relname} does not exist"), None));
    if !may {
        fail(SqlState::InsufficientPrivilege, format!("must be owner of table {relname} to index its values"), None);
    }
    if !matches!(relkind.as_str(), "r" | "p" | "m") {
        fail(SqlState::from_code("42809"), format!("\"{relname}\" is not a table or materialized view"), None);
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
        notice!("{msg}");
        return vec![];
    }
    let columns = text_columns(rel, column);
    if let Some(c) = column {
        if columns.is_empty() {
            let exists = one::<bool>(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = $1 AND attname = $2 AND attnum > 0 AND NOT attisdropped)",
                &[rel.into(), c.into()],
            )
            .unwrap_or(false);
            if exists {
                fail(SqlState::from_code("42804"), format!("column \"{c}\" of {relname} is not a text column"), Some("Only text, varchar, char, citext, enum and other string types are indexed."));
            }
            fail(SqlState::from_code("42703"), format!("column \"{c}\" of relation {relname} does not exist"), None);
        }
    }
    let mut out = Vec::new();
    for col in &columns {
        if let Some(b) = owner::as_owner(|| build_column(rel, &relname, col, include_rls, explicit && column.is_some())) {
            out.push(b);
        }
    }
    if !out.is_empty() && relkind != "m" {
        owner::as_owner(|| ensure_triggers(rel, &relname));
    }
    out
}

fn text_columns(rel: pg_sys::Oid, only: Option<&str>) -> Vec<Column> {
    Spi::connect(|c| {
        c.select(
            "SELECT a.attnum, a.attname::text
             FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
               AND t.typcategory IN ('S', 'E') AND ($2::text IS NULL OR a.attname = $2)
             ORDER BY a.attnum",
            None,
            &[rel.into(), only.into()],
        )
        .map(|t| {
            t.filter_map(|r| {
                Some(Column {
                    attnum: r.get::<i16>(1).ok()??,
                    name: r.get::<String>(2).ok()??,
                })
            })
            .collect()
        })
        .unwrap_or_default()
    })
}

/// Builds one column's index. None when it is skipped (NOTICE) instead of built.
fn build_column(rel: pg_sys::Oid, relname: &str, col: &Column, include_rls: bool, explicit: bool) -> Option<Built> {
    let started = Instant::now();
    let qcol = quote_identifier(&col.name);
    let max_len = gucs::index_max_value_length();
    // The user's table is read as its owner, in a restricted context (owner.rs).
    let (distinct, avg_len, too_long) = owner::as_table_owner(rel, || {
        Spi::get_three::<i64, f64, i64>(&format!(
            "SELECT pg_catalog.count(DISTINCT v)::int8, coalesce(pg_catalog.avg(pg_catalog.length(v)), 0)::float8,
                    pg_catalog.count(DISTINCT v) FILTER (WHERE pg_catalog.length(v) > {max_len})::int8
             FROM (SELECT {} AS v FROM {relname}) s",
            printed(&qcol)
        ))
    })
    .ok()
    .map(|(a, b, c)| (a.unwrap_or(0), b.unwrap_or(0.0), c.unwrap_or(0)))
    .unwrap_or((0, 0.0, 0));
    let skip = |why: String| -> Option<Built> {
        let msg = format!("column {relname}.{qcol} is not indexed: {why}");
        if explicit {
            fail(SqlState::ProgramLimitExceeded, msg, Some("Raise nl2sql.index_max_distinct or nl2sql.index_max_avg_length to index it."));
        }
        notice!("{msg}");
        None
    };
    if distinct > gucs::index_max_distinct() {
        return skip(format!("{distinct} distinct values, more than nl2sql.index_max_distinct"));
    }
    if avg_len > gucs::index_max_avg_length() as f64 {
        return skip(format!("free text (average length {avg_len:.0}, more than nl2sql.index_max_avg_length)"));
    }
    let emb = embedder::current();
    let emb_id = emb.id();
    let id = one::<i32>(
        "INSERT INTO nl2sql.value_index (relid, attnum, embedder, dims, status, include_rls, max_length)
         VALUES ($1, $2, $3, 256, 'building', $4, $5)
         ON CONFLICT (relid, attnum) DO UPDATE
            SET embedder = excluded.embedder, status = 'building', include_rls = excluded.include_rls,
                max_length = excluded.max_length
         RETURNING id",
        &[rel.into(), col.attnum.into(), emb_id.as_str().into(), include_rls.into(), max_len.into()],
    )
    .unwrap_or_else(|| fail(SqlState::InternalError, "could not register the value index".into(), None));
    let part = format!("nl2sql.value_entries_{id}");
    drop_partition(id);
    run("DELETE FROM nl2sql.value_queue WHERE column_id = $1", &[id.into()]);
    run("DELETE FROM nl2sql.value_removals WHERE column_id = $1", &[id.into()]);
    run(&format!("CREATE TABLE {part} PARTITION OF nl2sql.value_entries FOR VALUES IN ({id})"), &[]);
    notice!("nl2sql: indexing {relname}.{qcol}: {distinct} distinct values");

    let source = format!(
        "SELECT DISTINCT v FROM (SELECT {} AS v FROM {relname} WHERE {qcol} IS NOT NULL) s
         WHERE pg_catalog.length(v) BETWEEN 1 AND {max_len}",
        printed(&qcol)
    );
    let (values, phrases, dims) = match &emb {
        Embedder::Builtin => load_builtin(id, &part, rel, &source),
        Embedder::Remote(ep) => load_remote(id, &part, rel, &source, ep),
    };
    let loaded = started.elapsed().as_secs_f64();
    let big = values + phrases > 100_000;
    if big {
        notice!("nl2sql: {relname}.{qcol}: {values} values and {phrases} phrases loaded in {loaded:.1} s; building its indexes");
    }
    run(&format!("CREATE INDEX ON {part} (key)"), &[]);
    let keyed = started.elapsed().as_secs_f64();
    build_hnsw(&part, dims);
    let hnsw = started.elapsed().as_secs_f64();
    run(&format!("ANALYZE {part}"), &[]);
    let seconds = started.elapsed().as_secs_f64();
    if big {
        notice!(
            "nl2sql: {relname}.{qcol} indexed in {seconds:.1} s (load {loaded:.1} s, key btree {:.1} s, HNSW {:.1} s)",
            keyed - loaded,
            hnsw - keyed
        );
    }
    run(
        "UPDATE nl2sql.value_index
         SET status = 'ready', dims = $2, value_count = $3, phrase_count = $4, skipped_values = $5,
             built_at = now(), refreshed_at = now(), build_ms = $6
         WHERE id = $1",
        &[id.into(), dims.into(), values.into(), phrases.into(), too_long.into(), (seconds * 1000.0).into()],
    );
    Some(Built { relid: rel, column: col.name.clone(), status: "ready".into(), values, phrases, skipped: too_long, seconds })
}

/// A column's values as the index stores them: printed by their type's output function, as the
/// triggers print them (never cast: a cast to text may be a function the type's owner wrote).
fn printed(qcol: &str) -> String {
    format!("pg_catalog.format('%s', {qcol})")
}

/// Reads the values `source` selects from `rel` as the table's owner, a chunk at a time, and
/// hands each chunk to `store`, which runs as the extension's owner. Returns how many were read.
fn stream_values(rel: pg_sys::Oid, source: &str, mut store: impl FnMut(&mut pgrx::spi::SpiClient<'_>, Vec<String>)) -> i64 {
    Spi::connect_mut(|client| {
        let name = owner::as_table_owner(rel, || client.open_cursor(source, &[]).detach_into_name());
        let mut total = 0i64;
        loop {
            check_for_interrupts!();
            let chunk: Vec<String> = owner::as_table_owner(rel, || {
                let mut cursor = client.find_cursor(&name).unwrap_or_else(|e| fail(SqlState::InternalError, format!("{e}"), None));
                let rows = cursor
                    .fetch(READ_CHUNK)
                    .map(|t| t.filter_map(|r| r.get::<String>(1).ok().flatten()).collect())
                    .unwrap_or_default();
                cursor.detach_into_name();
                rows
            });
            if chunk.is_empty() {
                break;
            }
            total += chunk.len() as i64;
            store(client, chunk);
        }
        if let Ok(cursor) = client.find_cursor(&name) {
            std::mem::drop(cursor); // closes it
        }
        total
    })
}

fn load_builtin(id: i32, part: &str, rel: pg_sys::Oid, source: &str) -> (i64, i64, i32) {
    let insert = format!(
        "INSERT INTO {part} (column_id, value, term, key, sig)
         SELECT {id}, v, v, nl2sql.fold(v), nl2sql.signature(v)::bit(256) FROM pg_catalog.unnest($1::pg_catalog.text[]) AS v"
    );
    let values = stream_values(rel, source, |client, chunk| {
        if let Err(e) = client.update(insert.as_str(), None, &[chunk.into()]) {
            fail(SqlState::InternalError, format!("nl2sql internal query failed: {e}"), None);
        }
    });
    let cap = phrase_cap(values as usize);
    let phrases = Spi::get_one::<i64>(&format!(
        "WITH ph AS (SELECT e.value AS v, p FROM {part} e, pg_catalog.unnest(nl2sql.phrases(e.value)) p),
              ok AS (SELECT p FROM ph GROUP BY p HAVING pg_catalog.count(*) <= {cap}),
              ins AS (INSERT INTO {part} (column_id, value, term, key, sig)
                      SELECT {id}, ph.v, ph.p, ph.p, nl2sql.signature(ph.p)::bit(256) FROM ph JOIN ok USING (p) RETURNING 1)
         SELECT pg_catalog.count(*) FROM ins"
    ))
    .ok()
    .flatten()
    .unwrap_or(0);
    (values, phrases, embed::SIGNATURE_BITS as i32)
}

fn load_remote(id: i32, part: &str, rel: pg_sys::Oid, source: &str, ep: &nl2sql_core::http::Endpoint) -> (i64, i64, i32) {
    let mut values: Vec<String> = Vec::new();
    stream_values(rel, source, |_, chunk| values.extend(chunk));
    let rows = value_rows(&values);
    let phrases = rows.iter().filter(|(v, t)| v != t).count() as i64;
    let dims = insert_remote(id, part, ep, &rows);
    (values.len() as i64, phrases, dims)
}

/// (value, term) pairs: each value as itself, and its phrases shared by few enough values.
fn value_rows(values: &[String]) -> Vec<(String, String)> {
    let mut by_phrase: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, v) in values.iter().enumerate() {
        for p in embed::phrases(v, 16) {
            by_phrase.entry(p).or_default().push(i);
        }
    }
    let mut rows: Vec<(String, String)> = values.iter().map(|v| (v.clone(), v.clone())).collect();
    let cap = phrase_cap(values.len());
    for (p, owners) in by_phrase {
        if owners.len() <= cap {
            rows.extend(owners.into_iter().map(|i| (values[i].clone(), p.clone())));
        }
    }
    rows
}

/// Embeds the terms of `rows` with the endpoint and stores them; returns the dimension.
fn insert_remote(id: i32, part: &str, ep: &nl2sql_core::http::Endpoint, rows: &[(String, String)]) -> i32 {
    let mut dims = 0i32;
    for (n, chunk) in rows.chunks(LOAD_CHUNK).enumerate() {
        let terms: Vec<String> = chunk.iter().map(|(_, t)| t.clone()).collect();
        let vectors = embedder::embed(ep, &terms);
        dims = vectors.first().map(|v| v.len() as i32).unwrap_or(dims);
        if dims > 64_000 {
            fail(SqlState::ProgramLimitExceeded, format!("the embedding endpoint returns {dims} dimensions; at most 64000 are supported"), None);
        }
        let vals: Vec<String> = chunk.iter().map(|(v, _)| v.clone()).collect();
        let lits: Vec<String> = vectors.iter().map(|v| embedder::vector_literal(v)).collect();
        run(
            &format!(
                "INSERT INTO {part} (column_id, value, term, key, sig, embedding)
                 SELECT {id}, x.v, x.t, nl2sql.fold(x.t), binary_quantize(x.e::vector)::bit({dims}), x.e::vector
                 FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS x(v, t, e)"
            ),
            &[vals.into(), terms.into(), lits.into()],
        );
        if (n + 1) % 20 == 0 {
            notice!("nl2sql: {} of {} entries embedded", ((n + 1) * LOAD_CHUNK).min(rows.len()), rows.len());
        }
    }
    dims.max(1)
}

fn build_hnsw(part: &str, dims: i32) {
    let old = one::<String>("SELECT pg_catalog.current_setting('maintenance_work_mem')", &[]).unwrap_or_default();
    let old_mb = one::<i64>("SELECT pg_catalog.pg_size_bytes(pg_catalog.current_setting('maintenance_work_mem')) / 1048576", &[]).unwrap_or(0);
    let want = gucs::index_build_memory_mb() as i64;
    if want > old_mb {
        run("SELECT pg_catalog.set_config('maintenance_work_mem', $1, true)", &[format!("{want}MB").into()]);
    }
    let (m, efc) = (gucs::index_hnsw_m(), gucs::index_hnsw_ef_construction());
    run(
        &format!("CREATE INDEX ON {part} USING hnsw ((sig::bit({dims})) bit_hamming_ops) WITH (m = {m}, ef_construction = {efc})"),
        &[],
    );
    if want > old_mb {
        run("SELECT pg_catalog.set_config('maintenance_work_mem', $1, true)", &[old.into()]);
    }
}

fn drop_partition(id: i32) {
    let part = format!("nl2sql.value_entries_{id}");
    if one::<bool>("SELECT pg_catalog.to_regclass($1) IS NOT NULL", &[part.as_str().into()]).unwrap_or(false) {
        run(&format!("DROP TABLE {part}"), &[]);
    }
}

const TRIGGERS: [(&str, &str); 4] = [
    ("nl2sql_values_insert", "AFTER INSERT ON {rel} REFERENCING NEW TABLE AS nl2sql_new"),
    ("nl2sql_values_update", "AFTER UPDATE ON {rel} REFERENCING OLD TABLE AS nl2sql_old NEW TABLE AS nl2sql_new"),
    ("nl2sql_values_delete", "AFTER DELETE ON {rel} REFERENCING OLD TABLE AS nl2sql_old"),
    ("nl2sql_values_truncate", "AFTER TRUNCATE ON {rel}"),
];

fn ensure_triggers(rel: pg_sys::Oid, relname: &str) {
    for (name, when) in TRIGGERS {
        let exists = one::<bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = $1 AND tgname = $2)",
            &[rel.into(), name.into()],
        )
        .unwrap_or(false);
        if !exists {
            let when = when.replace("{rel}", relname);
            run(&format!("CREATE TRIGGER {name} {when} FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._values_changed()"), &[]);
        }
    }
}

fn drop_triggers(relname: &str) {
    for (name, _) in TRIGGERS {
        run(&format!("DROP TRIGGER IF EXISTS {name} ON {relname}"), &[]);
    }
}

/// Drops the value indexes of `rel` (or of one column); returns the columns dropped.
pub fn drop(rel: pg_sys::Oid, column: Option<&str>) -> Vec<String> {
    let relname = relation_text(rel);
    let may = one::<bool>(
        "SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE') OR r.rolsuper FROM pg_catalog.pg_class c, pg_catalog.pg_roles r WHERE c.oid = $1 AND r.oid = $2",
        &[rel.into(), owner::caller().into()],
    )
    .unwrap_or(false);
    if !may {
        fail(SqlState::InsufficientPrivilege, format!("must be owner of table {relname} to drop its value index"), None);
    }
    owner::as_owner(|| {
        let dropped: Vec<(i32, String)> = Spi::connect_mut(|c| {
            c.update(
                "DELETE FROM nl2sql.value_index i USING pg_catalog.pg_attribute a
                 WHERE i.relid = $1 AND a.attrelid = i.relid AND a.attnum = i.attnum AND ($2::text IS NULL OR a.attname = $2)
                 RETURNING i.id, a.attname::text",
                None,
                &[rel.into(), column.into()],
            )
            .map(|t| t.filter_map(|r| Some((r.get::<i32>(1).ok()??, r.get::<String>(2).ok()??))).collect())
            .unwrap_or_default()
        });
        for (id, _) in &dropped {
            drop_partition(*id);
        }
        let left = one::<bool>("SELECT EXISTS (SELECT 1 FROM nl2sql.value_index WHERE relid = $1)", &[rel.into()]).unwrap_or(false);
        if !left {
            drop_triggers(&relname);
        }
        dropped.into_iter().map(|(_, c)| c).collect()
    })
}

/// Rebuilds the value indexes that are stale or dirty (all of `rel`'s when given), and embeds
/// queued values of endpoint-embedded columns.
pub fn refresh(rel: Option<pg_sys::Oid>) -> Vec<Built> {
    apply_removals(rel);
    let todo: Vec<(pg_sys::Oid, String, bool)> = owner::as_owner(|| {
        Spi::connect(|c| {
            c.select(
                "SELECT i.relid, a.attname::text, i.include_rls
                 FROM nl2sql.value_index i JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
                 WHERE ($1::oid IS NULL AND (i.status IN ('stale', 'dirty', 'building') OR i.embedder <> nl2sql.current_embedder()))
                    OR i.relid = $1
                 ORDER BY i.id",
                None,
                &[rel.into()],
            )
            .map(|t| t.filter_map(|r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<String>(2).ok()??, r.get::<bool>(3).ok()??))).collect())
            .unwrap_or_default()
        })
    });
    let mut out = Vec::new();
    for (relid, column, include_rls) in todo {
        out.extend(create(relid, Some(&column), include_rls, false));
    }
    if let Embedder::Remote(ep) = embedder::current() {
        owner::as_owner(|| drain_queue(&ep, None));
    }
    out
}

/// Removes from the index the values DML took away that no row holds any more (all columns, or
/// those of `rel`): each table is read as its owner (restricted), the index written as the
/// extension's owner.
fn apply_removals(rel: Option<pg_sys::Oid>) {
    let pending: Vec<(i32, pg_sys::Oid, String, Vec<String>)> = owner::as_owner(|| {
        Spi::connect(|c| {
            c.select(
                "SELECT r.column_id, i.relid, a.attname::text, pg_catalog.array_agg(r.value)
                 FROM nl2sql.value_removals r
                 JOIN nl2sql.value_index i ON i.id = r.column_id
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
                 WHERE $1::oid IS NULL OR i.relid = $1
                 GROUP BY 1, 2, 3",
                None,
                &[rel.into()],
            )
            .map(|t| {
                t.filter_map(|r| {
                    Some((r.get::<i32>(1).ok()??, r.get::<pg_sys::Oid>(2).ok()??, r.get::<String>(3).ok()??, r.get::<Vec<String>>(4).ok()??))
                })
                .collect()
            })
            .unwrap_or_default()
        })
    });
    let caller = owner::caller();
    for (id, relid, column, values) in pending {
        check_for_interrupts!();
        // Only tables the caller may maintain (superuser, or the table's owner).
        let may = Spi::connect(|c| {
            c.select(
                "SELECT pg_catalog.pg_has_role($2, c.relowner, 'USAGE') OR r.rolsuper
                 FROM pg_catalog.pg_class c, pg_catalog.pg_roles r
                 WHERE c.oid OPERATOR(pg_catalog.=) $1 AND r.oid OPERATOR(pg_catalog.=) $2",
                Some(1),
                &[relid.into(), caller.into()],
            )
            .ok()
            .and_then(|t| t.first().get::<bool>(1).ok().flatten())
            .unwrap_or(false)
        });
        if !may {
            continue;
        }
        let relname = relation_text(relid);
        let sql = format!(
            "SELECT coalesce(pg_catalog.array_agg(g.v), '{{}}') FROM pg_catalog.unnest($1::pg_catalog.text[]) AS g(v)
             WHERE NOT EXISTS (SELECT 1 FROM {relname} t WHERE {} OPERATOR(pg_catalog.=) g.v)",
            printed(&format!("t.{}", quote_identifier(&column)))
        );
        // One table's trouble (its policy fails, say) skips that column, not the refresh.
        let gone: Option<Vec<String>> = crate::pg::sandbox::savepoint(|| {
            owner::as_table_owner(relid, || {
                Spi::get_one_with_args::<Vec<String>>(&sql, &[values.clone().into()]).ok().flatten().unwrap_or_default()
            })
        });
        let Some(gone) = gone else {
            pgrx::warning!("nl2sql could not re-check the removed values of {relname}.{}", quote_identifier(&column));
            continue;
        };
        owner::as_owner(|| {
            run(
                "DELETE FROM nl2sql.value_entries e USING pg_catalog.unnest($2::text[]) AS g(v)
                 WHERE e.column_id = $1 AND e.value = g.v AND e.key = ANY (nl2sql.fold(g.v) || nl2sql.phrases(g.v))",
                &[id.into(), gone.into()],
            );
            run("DELETE FROM nl2sql.value_removals WHERE column_id = $1 AND value = ANY ($2)", &[id.into(), values.into()]);
        });
    }
}

/// The (column, value) pairs among `hits` that DML took away from some row and that wait for
/// their re-check: a search shows them only after checking the table as the caller.
fn pending_removals(hits: &[(i32, String)]) -> std::collections::HashSet<(i32, String)> {
    if hits.is_empty() {
        return Default::default();
    }
    let ids: Vec<i32> = hits.iter().map(|h| h.0).collect();
    let values: Vec<String> = hits.iter().map(|h| h.1.clone()).collect();
    owner::as_owner(|| {
        Spi::connect(|c| {
            c.select(
                "SELECT r.column_id, r.value FROM nl2sql.value_removals r
                 JOIN ROWS FROM (pg_catalog.unnest($1::int4[]), pg_catalog.unnest($2::text[])) AS h(id, v) ON r.column_id = h.id AND r.value = h.v",
                None,
                &[ids.into(), values.into()],
            )
            .map(|t| t.filter_map(|r| Some((r.get::<i32>(1).ok()??, r.get::<String>(2).ok()??))).collect())
            .unwrap_or_default()
        })
    })
}

/// Embeds values that DML queued for endpoint-embedded columns (all, or those of `columns`).
fn drain_queue(ep: &nl2sql_core::http::Endpoint, columns: Option<&[i32]>) {
    let queued: Vec<(i32, String, i32)> = Spi::connect(|c| {
        c.select(
            "SELECT q.column_id, q.value, i.dims FROM nl2sql.value_queue q JOIN nl2sql.value_index i ON i.id = q.column_id
             WHERE i.embedder = $1 AND ($2::int4[] IS NULL OR q.column_id = ANY ($2))
             ORDER BY q.column_id LIMIT 100000",
            None,
            &[crate::pg::embedder::current().id().as_str().into(), columns.map(|c| c.to_vec()).into()],
        )
        .map(|t| t.filter_map(|r| Some((r.get::<i32>(1).ok()??, r.get::<String>(2).ok()??, r.get::<i32>(3).ok()??))).collect())
        .unwrap_or_default()
    });
    let mut by_column: HashMap<i32, Vec<String>> = HashMap::new();
    for (id, v, _) in &queued {
        by_column.entry(*id).or_default().push(v.clone());
    }
    for (id, values) in by_column {
        let rows = value_rows(&values);
        insert_remote(id, &format!("nl2sql.value_entries_{id}"), ep, &rows);
        run("DELETE FROM nl2sql.value_queue WHERE column_id = $1 AND value = ANY ($2)", &[id.into(), values.into()]);
    }
}

/// One indexed column the caller may read.
struct Searchable {
    id: i32,
    relid: pg_sys::Oid,
    column: String,
    /// Results must be re-checked against the table, as the caller (dirty index, or RLS).
    recheck: bool,
}

/// A value found for a query.
pub struct Found {
    pub relid: pg_sys::Oid,
    pub column: String,
    pub value: String,
    pub score: f32,
}

fn searchable(caller: pg_sys::Oid, embedder_id: &str) -> Vec<Searchable> {
    Spi::connect(|c| {
        c.select(
            "SELECT i.id, i.relid, a.attname::text,
                    -- DML on a partition or child fires its own triggers, not the parent's
                    i.status = 'dirty' OR c.relrowsecurity OR c.relhassubclass OR c.relkind = 'p'
             FROM nl2sql.value_index i
             JOIN pg_catalog.pg_attribute a ON a.attrelid = i.relid AND a.attnum = i.attnum
             JOIN pg_catalog.pg_class c ON c.oid = i.relid
             WHERE i.status IN ('ready', 'dirty') AND i.embedder = $2
               AND pg_catalog.has_column_privilege($1, i.relid, i.attnum, 'SELECT')
               AND (NOT c.relrowsecurity OR i.include_rls)",
            None,
            &[caller.into(), embedder_id.into()],
        )
        .map(|t| {
            t.filter_map(|r| {
                Some(Searchable {
                    id: r.get::<i32>(1).ok()??,
                    relid: r.get::<pg_sys::Oid>(2).ok()??,
                    column: r.get::<String>(3).ok()??,
                    recheck: r.get::<bool>(4).ok()??,
                })
            })
            .collect()
        })
        .unwrap_or_default()
    })
}

/// Values similar to the words of `query` in the columns the caller may read: split
/// retrieval of the query's phrases, HNSW candidates, exact rerank, `threshold`, best `k`.
/// `drain`: first embed the values DML queued for endpoint-embedded columns (a write; off
/// inside nl2sql(), which may run in a read-only transaction).
/// `skip`: sorted words whose phrases are not looked up (the names of tables and columns).
pub fn search_values(query: &str, skip: &[String], k: usize, threshold: f32, drain: bool) -> Vec<Found> {
    let phrases = retrieve::query_phrases_skipping(query, skip);
    if phrases.is_empty() || k == 0 {
        return vec![];
    }
    let caller = owner::caller();
    let emb = embedder::current();
    let emb_id = emb.id();
    let limit = (k * 4).max(20) as i64;
    let (columns, candidates) = match &emb {
        // One pass as the owner: the query's signatures need no endpoint.
        Embedder::Builtin => {
            let sigs: Vec<String> = phrases.iter().map(|p| embed::signature_text(p)).collect();
            owner::as_owner(|| {
                let columns = searchable(caller, &emb_id);
                let ids: Vec<i32> = columns.iter().map(|c| c.id).collect();
                let found = if ids.is_empty() { vec![] } else { candidates(&phrases, &sigs, None, &ids, embed::SIGNATURE_BITS, limit) };
                (columns, found)
            })
        }
        // The endpoint is called only when some column was indexed with it.
        Embedder::Remote(ep) => {
            let columns = owner::as_owner(|| searchable(caller, &emb_id));
            if columns.is_empty() {
                return vec![];
            }
            let ids: Vec<i32> = columns.iter().map(|c| c.id).collect();
            let v = embedder::embed(ep, &phrases);
            let sigs: Vec<String> = v.iter().map(|x| x.iter().map(|f| if *f > 0.0 { '1' } else { '0' }).collect()).collect();
            let dims = sigs.first().map(|s| s.len()).unwrap_or(embed::SIGNATURE_BITS);
            let vectors: Vec<String> = v.iter().map(|x| embedder::vector_literal(x)).collect();
            let found = owner::as_owner(|| {
                if drain {
                    drain_queue(ep, Some(&ids));
                }
                candidates(&phrases, &sigs, Some(vectors), &ids, dims, limit)
            });
            (columns, found)
        }
    };
    let by_id: HashMap<i32, &Searchable> = columns.iter().map(|c| (c.id, c)).collect();
    let ranked = retrieve::rank(&phrases, &candidates, threshold, usize::MAX);
    let pending = pending_removals(&ranked.iter().map(|h| (h.column as i32, h.value.clone())).collect::<Vec<_>>());
    let mut out = Vec::new();
    let mut rechecks = 0usize;
    for hit in ranked {
        let Some(col) = by_id.get(&(hit.column as i32)) else { continue };
        let doubtful = col.recheck || pending.contains(&(col.id, hit.value.clone()));
        if doubtful {
            // Each re-check reads the table: a bounded number per search.
            rechecks += 1;
            if rechecks > MAX_RECHECKS || !exists_as_caller(col.relid, &col.column, &hit.value) {
                continue;
            }
        }
        out.push(Found { relid: col.relid, column: col.column.clone(), value: hit.value, score: hit.score });
        if out.len() >= k {
            break;
        }
    }
    out
}

/// Candidates for every (phrase, column): the nearest signatures through each column's HNSW
/// index, plus the exact matches (up to case and accents) through its btree on the folded key,
/// which the approximate search may miss among many near-identical values.
fn candidates(phrases: &[String], sigs: &[String], vectors: Option<Vec<String>>, ids: &[i32], dims: usize, limit: i64) -> Vec<Candidate> {
    let remote = vectors.is_some();
    // Runs under as_owner's search_path, where pgvector's operators and types resolve.
    let cosine = if remote { "(1 - (e.embedding <=> ($3::text[])[p.i]::vector))::float4" } else { "NULL::float4" };
    let types = [pg_sys::TEXTARRAYOID, pg_sys::TEXTARRAYOID, pg_sys::TEXTARRAYOID].map(PgOid::from);
    let args = [
        DatumWithOid::from(sigs.to_vec()),
        DatumWithOid::from(phrases.to_vec()),
        DatumWithOid::from(vectors.unwrap_or_default()),
    ];
    with_ef_search(|| {
        CANDIDATE_PLANS.with_borrow_mut(|plans| {
            Spi::connect(|c| {
                let mut out = Vec::new();
                for &id in ids {
                    let key = (id, dims, remote, limit);
                    if !plans.contains_key(&key) {
                        let sql = format!(
                            "SELECT (p.i - 1)::int4, e.value, e.term, {cosine}, NULL::float4
                             FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS p(sig, i)
                             CROSS JOIN LATERAL (
                                 SELECT x.value, x.term, x.embedding FROM nl2sql.value_entries_{id} x
                                 ORDER BY x.sig::bit({dims}) <~> p.sig::bit({dims})
                                 LIMIT {limit}) e
                             UNION ALL
                             SELECT (p.i - 1)::int4, e.value, e.term, {cosine}, NULL::float4
                             FROM pg_catalog.unnest($2::text[]) WITH ORDINALITY AS p(key, i)
                             JOIN nl2sql.value_entries_{id} e ON e.key = p.key"
                        );
                        let plan = c
                            .prepare(sql.as_str(), &types)
                            .unwrap_or_else(|e| fail(SqlState::InternalError, format!("could not prepare the value search: {e}"), None))
                            .keep();
                        plans.insert(key, plan);
                    }
                    out.extend(read_candidates(id, c.select(&plans[&key], None, &args)));
                }
                // pg_trgm's similarity, computed here rather than by a function the search_path
                // resolves.
                for cand in out.iter_mut() {
                    if let Some(p) = phrases.get(cand.phrase) {
                        cand.trigram = Some(embed::trigram_similarity(p, &cand.term));
                    }
                }
                out
            })
        })
    })
}

/// Runs `f` with hnsw.ef_search at nl2sql.search_ef, then puts the caller's value back.
fn with_ef_search<T>(f: impl FnOnce() -> T) -> T {
    let old = one::<String>("SELECT pg_catalog.current_setting('hnsw.ef_search', true)", &[]);
    run("SELECT pg_catalog.set_config('hnsw.ef_search', $1, true)", &[gucs::search_ef().to_string().into()]);
    let out = f();
    if let Some(old) = old.filter(|o| !o.is_empty()) {
        run("SELECT pg_catalog.set_config('hnsw.ef_search', $1, true)", &[old.into()]);
    }
    out
}

fn read_candidates(column: i32, table: Result<pgrx::spi::SpiTupleTable<'_>, pgrx::spi::SpiError>) -> Vec<Candidate> {
    {
        table
            .map(|t| {
                t.filter_map(|r| {
                    Some(Candidate {
                        phrase: r.get::<i32>(1).ok()?? as usize,
                        column: column as u32,
                        value: r.get::<String>(2).ok()??,
                        term: r.get::<String>(3).ok()??,
                        cosine: r.get::<f32>(4).ok().flatten(),
                        trigram: r.get::<f32>(5).ok().flatten(),
                    })
                })
                .collect()
            })
            .unwrap_or_default()
    }
}

/// Whether a row the caller may see still holds `value`: read as the caller, in the sandbox,
/// with every function the read runs judged like generated SQL's.
fn exists_as_caller(relid: pg_sys::Oid, column: &str, value: &str) -> bool {
    let args = [DatumWithOid::from(relid), DatumWithOid::from(column), DatumWithOid::from(value)];
    crate::pg::sandbox::inspect(RECHECK_TIMEOUT, || {
        Spi::get_one_with_args::<bool>("SELECT nl2sql._value_exists($1, $2, $3)", &args).ok().flatten()
    })
    .ok()
    .flatten()
    .unwrap_or(false)
}

/// Most values one search re-checks against their tables.
const MAX_RECHECKS: usize = 20;

/// Time allowed for re-checking one value against its table.
const RECHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Least score for a value that is not the literal up to case and accents to replace it.
const CLOSEST_MIN_SCORE: f32 = 0.9;

/// The stored value of an indexed column closest to `literal`, for the agent alignment: None
/// when `literal` is stored as written, when the column has no index the caller may use, or
/// when nothing is close. The same value up to case, accents and spacing wins; else a whole
/// value scoring at least 0.9 (a typo), found through the built-in signatures.
pub fn closest_stored(relid: pg_sys::Oid, column: &str, literal: &str) -> Option<String> {
    let caller = owner::caller();
    let emb = embedder::current();
    let emb_id = emb.id();
    let (col, found) = owner::as_owner(|| {
        let col = searchable(caller, &emb_id).into_iter().find(|c| c.relid == relid && c.column == column)?;
        // Whole values (term = value) with the same folded text.
        let same: Vec<String> = Spi::connect(|c| {
            c.select(
                "SELECT DISTINCT value FROM nl2sql.value_entries WHERE column_id = $1 AND key = nl2sql.fold($2) AND term = value ORDER BY 1 LIMIT 10",
                None,
                &[col.id.into(), literal.into()],
            )
            .map(|t| t.filter_map(|r| r.get::<String>(1).ok().flatten()).collect())
            .unwrap_or_default()
        });
        if same.iter().any(|v| v == literal) {
            return Some((col, None));
        }
        if let [one] = same.as_slice() {
            return Some((col, Some(one.clone())));
        }
        if !same.is_empty() || !matches!(emb, Embedder::Builtin) {
            return Some((col, None));
        }
        let phrases = vec![literal.to_string()];
        let sigs = vec![embed::signature_text(literal)];
        let hits = candidates(&phrases, &sigs, None, &[col.id], embed::SIGNATURE_BITS, 20);
        let best = retrieve::rank(&phrases, &hits, CLOSEST_MIN_SCORE, usize::MAX)
            .into_iter()
            .find(|h| h.value != literal && embed::edit_similarity(&h.value, literal) >= CLOSEST_MIN_SCORE)
            .map(|h| h.value);
        Some((col, best))
    })?;
    let value = found?;
    let doubtful = col.recheck || pending_removals(&[(col.id, value.clone())]).contains(&(col.id, value.clone()));
    if doubtful && !exists_as_caller(col.relid, &col.column, &value) {
        return None;
    }
    Some(value)
}

/// A column found for a query.
pub struct FoundColumn {
    pub relid: pg_sys::Oid,
    pub column: String,
    pub score: f32,
}

/// Columns whose table and column names (and comments) are similar to the words of `query`,
/// among those the caller may read.
/// `embed_pending`: first embed descriptions the endpoint has not seen (a write; off inside
/// nl2sql(), which may run in a read-only transaction).
pub fn search_columns(query: &str, k: usize, embed_pending: bool) -> Vec<FoundColumn> {
    let phrases = retrieve::query_phrases(query);
    if phrases.is_empty() || k == 0 {
        return vec![];
    }
    let caller = owner::caller();
    let emb = embedder::current();
    if let (Embedder::Remote(ep), true) = (&emb, embed_pending) {
        owner::as_owner(|| embed_pending_columns(ep));
    }
    let rows: Vec<(pg_sys::Oid, String, String, String, Option<f32>)> = owner::as_owner(|| {
        // Candidates: per query phrase, the columns whose names' signatures are nearest
        // (built-in), or the nearest descriptions by the endpoint's vectors. For the built-in
        // embedder the embedder is checked outside the nearest-neighbour scan so that the HNSW
        // index on signatures serves it (rows of an endpoint embedder have no signature).
        let (source, qvec) = match &emb {
            Embedder::Builtin => (
                "FROM pg_catalog.unnest($3::text[]) AS p(sig)
                 CROSS JOIN LATERAL (SELECT * FROM nl2sql.column_embeddings x
                                     ORDER BY x.sig <~> p.sig::bit(256) LIMIT 50) ce",
                None,
            ),
            Embedder::Remote(ep) => {
                let v = embedder::embed(ep, &[query.to_string()]);
                (
                    // Filtered inside: another endpoint's vectors may have other dimensions.
                    "FROM (SELECT * FROM nl2sql.column_embeddings x WHERE x.embedder = $2
                           ORDER BY x.embedding <=> $4::vector LIMIT 200) ce",
                    v.first().map(|x| embedder::vector_literal(x)),
                )
            }
        };
        let cosine = if qvec.is_some() { "(1 - (ce.embedding <=> $4::vector))::float4" } else { "NULL::float4" };
        let sql = format!(
            "SELECT DISTINCT ce.relid, a.attname::text, c.relname::text, ce.description, {cosine}
             {source}
             JOIN pg_catalog.pg_attribute a ON a.attrelid = ce.relid AND a.attnum = ce.attnum
             JOIN pg_catalog.pg_class c ON c.oid = ce.relid
             WHERE ce.embedder = $2 AND pg_catalog.has_column_privilege($1, ce.relid, ce.attnum, 'SELECT')"
        );
        let sigs: Vec<String> = phrases.iter().map(|p| embed::signature_text(p)).collect();
        let args = [
            DatumWithOid::from(caller),
            DatumWithOid::from(emb.id().as_str()),
            DatumWithOid::from(sigs),
            DatumWithOid::from(qvec.unwrap_or_default().as_str()),
        ];
        with_ef_search(|| Spi::connect(|c| {
            c.select(&sql, None, &args)
                .map(|t| {
                    t.filter_map(|r| {
                        Some((
                            r.get::<pg_sys::Oid>(1).ok()??,
                            r.get::<String>(2).ok()??,
                            r.get::<String>(3).ok()??,
                            r.get::<String>(4).ok()??,
                            r.get::<f32>(5).ok().flatten(),
                        ))
                    })
                    .collect()
                })
                .unwrap_or_default()
        }))
    });
    let phrase_features: Vec<_> = phrases.iter().map(|p| embed::features(p)).collect();
    let mut scored: Vec<FoundColumn> = rows
        .into_iter()
        .map(|(relid, column, table, description, cosine)| {
            let names = embed::features(&format!("{table} {column}"));
            let own = embed::features(&column);
            let lexical = phrase_features
                .iter()
                .map(|p| embed::feature_cosine(p, &own).max(0.9 * embed::feature_cosine(p, &names)))
                .fold(0f32, f32::max);
            let about = embed::feature_cosine(&embed::features(query), &embed::features(&description));
            let score = lexical.max(about).max(cosine.unwrap_or(0.0)).min(1.0);
            FoundColumn { relid, column, score }
        })
        .collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.column.cmp(&b.column)));
    scored.truncate(k);
    scored
}

/// Embeds the schema descriptions that the endpoint embedder has not seen yet.
fn embed_pending_columns(ep: &nl2sql_core::http::Endpoint) {
    let id = Embedder::Remote(ep.clone()).id();
    let pending: Vec<(pg_sys::Oid, i16, String)> = Spi::connect(|c| {
        c.select("SELECT relid, attnum, description FROM nl2sql.column_embeddings WHERE embedder <> $1", None, &[id.as_str().into()])
            .map(|t| t.filter_map(|r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<i16>(2).ok()??, r.get::<String>(3).ok()??))).collect())
            .unwrap_or_default()
    });
    if pending.is_empty() {
        return;
    }
    let texts: Vec<String> = pending.iter().map(|p| p.2.clone()).collect();
    let vectors = embedder::embed(ep, &texts);
    let relids: Vec<pg_sys::Oid> = pending.iter().map(|p| p.0).collect();
    let attnums: Vec<i16> = pending.iter().map(|p| p.1).collect();
    let lits: Vec<String> = vectors.iter().map(|v| embedder::vector_literal(v)).collect();
    run(
        "UPDATE nl2sql.column_embeddings ce SET embedding = x.e::vector, embedder = $4, sig = NULL
         FROM ROWS FROM (pg_catalog.unnest($1::oid[]), pg_catalog.unnest($2::int2[]), pg_catalog.unnest($3::text[])) AS x(relid, attnum, e)
         WHERE ce.relid = x.relid AND ce.attnum = x.attnum",
        &[relids.into(), attnums.into(), lits.into(), id.as_str().into()],
    );
}
