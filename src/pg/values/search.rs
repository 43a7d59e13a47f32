//! The read path: the store the core's lookups (nl2sql_core::retrieval::lookup) run over, and the schema
//! embeddings' search. It never writes (it works on a hot standby) and never waits long: each
//! column's entries are read in a subtransaction with a short lock timeout, rolled back at
//! once so no lock outlives the read; a column that cannot be read in time is left out and
//! named in the trace.

use super::entries_table;
use crate::gucs;
use crate::pg::{embedder, owner, sandbox, spi};
use nl2sql_core::retrieval::embed;
use nl2sql_core::retrieval::embedder::Embedder;
use nl2sql_core::retrieval::lookup::{self, Lookup, ValueStore};
use nl2sql_core::retrieval::retrieve::{self, Candidate};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi::OwnedPreparedStatement;
use pgrx::PgOid;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// How long a search waits for the lock on one column's entries (a generation being dropped).
const READ_LOCK_TIMEOUT: &str = "100ms";
/// Values waiting to be embedded that one search looks at, per search.
const QUEUE_LOOKS: i64 = 2000;
/// Keys read either side of a lookup's key in byte order, forwards and reversed: a key with one
/// typo sorts next to its value's key by the part before the typo or by the part after it,
/// which the HNSW graph's approximate search can miss among a million values.
const NEIGHBOURS: usize = 8;
/// Shorter keys have too many neighbours to tell a typo from another value.
const NEIGHBOUR_MIN_CHARS: usize = 4;
/// Time allowed for re-checking one value against its table.
const RECHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

thread_local! {
    /// The candidate query of each column's generation, prepared once per session: planning
    /// it costs more than running it. Keyed by (column, generation, signature bits, endpoint
    /// embedder, limit, graph search only).
    static CANDIDATE_PLANS: RefCell<HashMap<(i32, i32, usize, bool, i64, bool), OwnedPreparedStatement>> = RefCell::new(HashMap::new());
    /// Columns the searches of the current statement left out, for the trace.
    static SKIPPED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The statement (its start) and role the restored indexes were last named to.
    static RESTORED_NAMED: std::cell::Cell<(pg_sys::TimestampTz, pg_sys::Oid)> = const { std::cell::Cell::new((0, pg_sys::InvalidOid)) };
}

/// Restored indexes named in one NOTICE.
const RESTORED_NAMED_MAX: usize = 10;

/// The relation's name as the schema prompt writes it: qualified only when not on the search_path.
pub fn visible_name(rel: pg_sys::Oid) -> String {
    spi::read::<String>("SELECT $1::pg_catalog.regclass::pg_catalog.text", &[rel.into()]).unwrap_or_default()
}

/// One indexed column the caller may read.
struct Searchable {
    id: i32,
    generation: i32,
    relid: pg_sys::Oid,
    column: String,
    /// Results must be re-checked against the table, as the caller (dirty index, or RLS).
    recheck: bool,
    /// The column's type.
    type_oid: pg_sys::Oid,
}

/// A value found for a query.
pub struct Found {
    pub relid: pg_sys::Oid,
    pub column: String,
    pub value: String,
    pub score: f32,
}

/// The indexed columns `caller` may read, built by the embedder in use. Read as the owner.
fn searchable(caller: pg_sys::Oid, embedder_id: &str) -> Vec<Searchable> {
    spi::rows(
        include_str!("../../../sql/queries/values_search_searchable.sql"),
        &[caller.into(), embedder_id.into()],
        |r| {
            Some(Searchable {
                id: r.get::<i32>(1).ok()??,
                generation: r.get::<i32>(2).ok()??,
                relid: r.get::<pg_sys::Oid>(3).ok()??,
                column: r.get::<String>(4).ok()??,
                recheck: r.get::<bool>(5).ok()??,
                type_oid: r.get::<pg_sys::Oid>(6).ok()??,
            })
        },
    )
}

/// The value index as the core's lookups see it.
struct Store {
    columns: HashMap<u32, Searchable>,
    embedder: Embedder,
    /// The endpoint's vectors of the texts looked up so far (a search reads in two rounds).
    vectors: HashMap<String, Vec<f32>>,
}

/// Names, once per statement, the indexes `caller` may read that pg_restore brought back
/// without entries: searches find nothing in them until nl2sql.refresh_value_indexes() builds
/// them, and the DBA should hear so rather than see values silently missed.
fn notice_restored(caller: pg_sys::Oid) {
    // SAFETY: reads the current statement's start time.
    let statement = unsafe { pg_sys::GetCurrentStatementStartTimestamp() };
    if RESTORED_NAMED.with(|n| n.replace((statement, caller))) == (statement, caller) {
        return;
    }
    let names: Vec<String> = owner::as_owner(|| {
        spi::rows(include_str!("../../../sql/queries/values_search_restored.sql"), &[caller.into()], |r| r.get::<String>(1).ok()?)
    });
    if names.is_empty() {
        return;
    }
    // Names as the NOTICE shows them: invisible characters (a line break, a BOM in a table's
    // name) written as `U&"..."` escapes.
    let shown = |n: &String| nl2sql_core::render::ident(n);
    let mut listed = names.iter().take(RESTORED_NAMED_MAX).map(shown).collect::<Vec<_>>().join(", ");
    if names.len() > RESTORED_NAMED_MAX {
        listed.push_str(&format!(" and {} more", names.len() - RESTORED_NAMED_MAX));
    }
    crate::pg::errors::notice(
        match names.len() {
            1 => format!("nl2sql: a value index restored without entries is not searched: {listed}"),
            n => format!("nl2sql: {n} value indexes restored without entries are not searched: {listed}"),
        },
        "pg_dump keeps which columns are indexed, not their entries; values of these columns are not found until they are built again.".into(),
        "Build them with SELECT nl2sql.refresh_value_indexes();".into(),
    );
}

/// Whose columns a search reads.
#[derive(Clone, Copy)]
pub enum Scope<'a> {
    /// nl2sql.search_values(): every indexed column the caller may read.
    Everything,
    /// What a prompt shows: none of these tables (strangers': core's Table::is_strangers), left
    /// out before the ranking so that none of hers takes the place of another's, and no column
    /// of a stranger's enum type (or of a domain over one), whoever's table holds it.
    Prompt(&'a [u32]),
}

/// Of `types`, those whose labels are a stranger's words (values_search_strangers_enums.sql).
/// Read as the caller: her search_path decides which types are visible.
fn strangers_enums(mut types: Vec<pg_sys::Oid>) -> Vec<pg_sys::Oid> {
    types.sort_unstable_by_key(|o| u32::from(*o));
    types.dedup();
    if types.is_empty() {
        return types;
    }
    spi::read(include_str!("../../../sql/queries/values_search_strangers_enums.sql"), &[DatumWithOid::from(types)]).unwrap_or_else(|| {
        crate::pg::errors::raise(&nl2sql_core::error::Report::new(
            nl2sql_core::error::SqlState::InternalError,
            "the enum types of untrusted owners could not be read",
        ))
    })
}

impl Store {
    fn new(caller: pg_sys::Oid, scope: Scope) -> Store {
        let embedder = embedder::current();
        let id = embedder.id();
        notice_restored(caller);
        let mut columns: HashMap<u32, Searchable> =
            owner::as_owner(|| searchable(caller, &id)).into_iter().map(|c| (c.id as u32, c)).collect();
        if let Scope::Prompt(leave_out) = scope {
            columns.retain(|_, c| !leave_out.contains(&u32::from(c.relid)));
            let hers = strangers_enums(columns.values().map(|c| c.type_oid).collect());
            columns.retain(|_, c| !hers.contains(&c.type_oid));
        }
        Store { columns, embedder, vectors: HashMap::new() }
    }

    fn columns(&self) -> Vec<lookup::Column> {
        let mut out: Vec<lookup::Column> = self.columns.values().map(|c| lookup::Column { id: c.id as u32, recheck: c.recheck }).collect();
        out.sort_by_key(|c| c.id);
        out
    }

    /// Reads one column's entries as the owner, in a discarded subtransaction with a short
    /// lock timeout; None (and the column noted) when it could not.
    fn read<T>(&self, column: u32, f: impl FnOnce(&str) -> T) -> Option<T> {
        let col = self.columns.get(&column)?;
        let table = entries_table(col.id, col.generation);
        let r = owner::as_owner(|| {
            sandbox::discarded(|| {
                spi::set_local(c"lock_timeout", READ_LOCK_TIMEOUT);
                spi::set_local(c"hnsw.ef_search", &gucs::search_ef().to_string());
                f(&table)
            })
        });
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                let name = format!("{}.{}", visible_name(col.relid), pgrx::spi::quote_identifier(&col.column));
                debug1!("nl2sql: value index of {} skipped: {}", nl2sql_core::render::ident(&name), e.message);
                SKIPPED.with_borrow_mut(|s| {
                    if !s.contains(&name) {
                        s.push(name)
                    }
                });
                None
            }
        }
    }

    /// The rows behind [`ValueStore::candidates`] (`graph_only`: only the HNSW part, for
    /// [`ValueStore::nearest`]).
    fn fetch(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize, graph_only: bool) -> Vec<Candidate> {
        if lookups.is_empty() || columns.is_empty() {
            return vec![];
        }
        let texts: Vec<String> = lookups.iter().map(|l| l.text.clone()).collect();
        // The lookups' signatures (and the endpoint's vectors): the endpoint is called only
        // because some column was indexed with it.
        let (mut sigs, vectors, dims) = match &self.embedder {
            Embedder::Builtin => (texts.iter().map(|t| embed::signature_text(t)).collect::<Vec<_>>(), None, embed::SIGNATURE_BITS),
            Embedder::Remote(ep) => {
                let missing: Vec<String> = texts.iter().filter(|t| !self.vectors.contains_key(*t)).cloned().collect();
                if !missing.is_empty() {
                    let got = embedder::embed(ep, &missing);
                    self.vectors.extend(missing.into_iter().zip(got));
                }
                let v: Vec<Vec<f32>> = texts.iter().map(|t| self.vectors.get(t).cloned().unwrap_or_default()).collect();
                let sigs: Vec<String> = v.iter().map(|x| x.iter().map(|f| if *f > 0.0 { '1' } else { '0' }).collect()).collect();
                let dims = sigs.first().map(|s| s.len()).unwrap_or(embed::SIGNATURE_BITS);
                (sigs, Some(v.iter().map(|x| embedder::vector_literal(x)).collect::<Vec<_>>()), dims)
            }
        };
        // No graph search for the lookups the core reads only exactly and by their neighbours.
        for (sig, l) in sigs.iter_mut().zip(lookups) {
            if !l.nearest {
                sig.clear();
            }
        }
        let remote = vectors.is_some();
        let args = [DatumWithOid::from(sigs), DatumWithOid::from(texts.clone()), DatumWithOid::from(vectors.unwrap_or_default())];
        let mut out: Vec<Candidate> = Vec::new();
        for &column in columns {
            check_for_interrupts!();
            let Some(col) = self.columns.get(&column) else { continue };
            let key = (col.id, col.generation, dims, remote, limit as i64, graph_only);
            let found = self.read(column, |table| {
                CANDIDATE_PLANS.with_borrow_mut(|plans| {
                    Spi::connect(|c| {
                        if !plans.contains_key(&key) {
                            plans.retain(|k, _| k.0 != key.0);
                            let plan = c
                                .prepare(candidate_sql(table, dims, remote, limit, graph_only).as_str(), &[pg_sys::TEXTARRAYOID, pg_sys::TEXTARRAYOID, pg_sys::TEXTARRAYOID].map(PgOid::from))
                                .unwrap_or_else(|e| super::fail(nl2sql_core::error::SqlState::InternalError, format!("could not prepare the value search: {e}"), None))
                                .keep();
                            plans.insert(key, plan);
                        }
                        match c.select(&plans[&key], None, &args) {
                            Ok(t) => t.filter_map(|r| candidate(column, &r)).collect::<Vec<_>>(),
                            Err(_) => vec![],
                        }
                    })
                })
            });
            out.extend(found.unwrap_or_default());
        }
        if remote && !graph_only {
            // Values DML queued for the endpoint, found by their text until they are embedded.
            let ids: Vec<i32> = columns.iter().map(|c| *c as i32).collect();
            let queued: Vec<(u32, String)> = owner::as_owner(|| {
                spi::rows(
                    "SELECT column_id, value FROM nl2sql.value_queue WHERE column_id = ANY ($1) LIMIT $2",
                    &[ids.into(), QUEUE_LOOKS.into()],
                    |r| Some((r.get::<i32>(1).ok()?? as u32, r.get::<String>(2).ok()??)),
                )
            });
            out.extend(lookup::queued_candidates(lookups, &queued, 0.3));
        }
        // pg_trgm's similarity, computed here rather than by a function the search_path resolves.
        for (n, cand) in out.iter_mut().enumerate() {
            nl2sql_core::interrupt::every(n, 1024);
            if let (Some(l), None) = (lookups.get(cand.phrase), cand.trigram) {
                cand.trigram = Some(nl2sql_core::text::trigram_similarity(&l.text, &cand.term));
            }
        }
        out
    }
}

impl ValueStore for Store {
    fn candidates(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate> {
        self.fetch(lookups, columns, limit, false)
    }

    fn nearest(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate> {
        self.fetch(lookups, columns, limit, true)
    }

    fn exact(&mut self, keys: &[String], columns: &[u32]) -> Vec<Candidate> {
        let mut out = Vec::new();
        for &column in columns {
            check_for_interrupts!();
            let found = self.read(column, |table| {
                spi::rows(
                    &format!(
                        "SELECT (p.i - 1)::int4, e.value, e.term, NULL::float4
                         FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS p(key, i)
                         JOIN {table} e ON e.key = p.key"
                    ),
                    &[keys.to_vec().into()],
                    |r| candidate(column, r),
                )
            });
            out.extend(found.unwrap_or_default());
        }
        out
    }

    fn same_key(&mut self, column: u32, text: &str) -> Vec<String> {
        let key = nl2sql_core::text::fold(text);
        self.read(column, |table| {
            spi::rows(
                &format!("SELECT DISTINCT value FROM {table} WHERE key = $1 AND term = value ORDER BY 1 LIMIT 10"),
                &[key.as_str().into()],
                |r| r.get::<String>(1).ok()?,
            )
        })
        .unwrap_or_default()
    }

    fn pending(&mut self, hits: &[(u32, String)]) -> HashSet<(u32, String)> {
        if hits.is_empty() {
            return HashSet::new();
        }
        let ids: Vec<i32> = hits.iter().map(|h| h.0 as i32).collect();
        let values: Vec<String> = hits.iter().map(|h| h.1.clone()).collect();
        owner::as_owner(|| {
            spi::rows(
                "SELECT r.column_id, r.value FROM nl2sql.value_removals r
                 JOIN ROWS FROM (pg_catalog.unnest($1::int4[]), pg_catalog.unnest($2::text[])) AS h(id, v) ON r.column_id = h.id AND r.value = h.v",
                &[ids.into(), values.into()],
                |r| Some((r.get::<i32>(1).ok()?? as u32, r.get::<String>(2).ok()??)),
            )
        })
        .into_iter()
        .collect()
    }

    fn still_held(&mut self, column: u32, value: &str) -> bool {
        let Some(col) = self.columns.get(&column) else { return false };
        exists_as_caller(col.relid, &col.column, value)
    }
}

/// The candidates of one column's generation for every looked-up text: the nearest signatures
/// through its HNSW index, and the exact matches (up to case and accents) through its btree on
/// the folded key, which the approximate search may miss among many near-identical values, and
/// the keys next to each lookup's in byte order, forwards and reversed (one typo away).
/// Runs under as_owner's search_path, where pgvector's operators and types resolve; an operator
/// whose operands are not of its exact types is named with its schema (`1 OPERATOR(pg_catalog.-)
/// float8`: a `-(int4, float8)` another role put in pgvector's schema would match exactly).
fn candidate_sql(table: &str, dims: usize, remote: bool, limit: usize, graph_only: bool) -> String {
    let cosine = if remote { "(1 OPERATOR(pg_catalog.-) (e.embedding <=> ($3::text[])[p.i]::vector))::float4" } else { "NULL::float4" };
    let graph = format!(
        "SELECT (p.i - 1)::int4, e.value, e.term, {cosine}
         FROM (SELECT u.sig, u.i FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS u(sig, i) WHERE u.sig <> '') p
         CROSS JOIN LATERAL (
             SELECT x.value, x.term, x.embedding FROM {table} x
             ORDER BY x.sig::bit({dims}) <~> p.sig::bit({dims})
             LIMIT {limit}) e"
    );
    if graph_only {
        return graph;
    }
    format!(
        "{graph}
         UNION ALL
         SELECT (p.i - 1)::int4, e.value, e.term, {cosine}
         FROM pg_catalog.unnest($2::text[]) WITH ORDINALITY AS p(key, i)
         JOIN {table} e ON e.key = p.key
         UNION ALL
         SELECT (p.i - 1)::int4, e.value, e.term, {cosine}
         FROM pg_catalog.unnest($2::text[]) WITH ORDINALITY AS p(key, i)
         CROSS JOIN LATERAL (
             (SELECT x.value, x.term, x.embedding FROM {table} x WHERE x.key COLLATE \"C\" > p.key
              ORDER BY x.key COLLATE \"C\" LIMIT {n})
             UNION ALL
             (SELECT x.value, x.term, x.embedding FROM {table} x WHERE x.key COLLATE \"C\" < p.key
              ORDER BY x.key COLLATE \"C\" DESC LIMIT {n})
             UNION ALL
             (SELECT x.value, x.term, x.embedding FROM {table} x
              WHERE pg_catalog.reverse(x.key) COLLATE \"C\" > pg_catalog.reverse(p.key)
              ORDER BY pg_catalog.reverse(x.key) COLLATE \"C\" LIMIT {n})
             UNION ALL
             (SELECT x.value, x.term, x.embedding FROM {table} x
              WHERE pg_catalog.reverse(x.key) COLLATE \"C\" < pg_catalog.reverse(p.key)
              ORDER BY pg_catalog.reverse(x.key) COLLATE \"C\" DESC LIMIT {n})) e
         WHERE pg_catalog.length(p.key) >= {min}",
        n = NEIGHBOURS,
        min = NEIGHBOUR_MIN_CHARS
    )
}

fn candidate(column: u32, r: &pgrx::spi::SpiHeapTupleData) -> Option<Candidate> {
    Some(Candidate {
        phrase: r.get::<i32>(1).ok()?? as usize,
        column,
        value: r.get::<String>(2).ok()??,
        term: r.get::<String>(3).ok()??,
        cosine: r.get::<f32>(4).ok().flatten(),
        trigram: None,
    })
}

/// Whether a row the caller may see still holds `value`: read as the caller, in the sandbox,
/// with every function the read runs judged like generated SQL's.
fn exists_as_caller(relid: pg_sys::Oid, column: &str, value: &str) -> bool {
    let args = [DatumWithOid::from(relid), DatumWithOid::from(column), DatumWithOid::from(value)];
    sandbox::inspect(RECHECK_TIMEOUT, || spi::read::<bool>("SELECT nl2sql._value_exists($1, $2, $3)", &args))
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Values similar to the words of `query` in the columns the caller may read (the core's
/// lookup: phrases and their other forms, HNSW and exact candidates, ranking, re-checks).
/// `skip`: sorted words whose phrases are not looked up (the names of tables and columns);
/// `scope`: whose columns are searched.
pub fn search_values(query: &str, skip: &[String], scope: Scope, k: usize, threshold: f32) -> Vec<Found> {
    let phrases = retrieve::query_phrases_skipping(query, skip);
    if phrases.is_empty() || k == 0 {
        return vec![];
    }
    let words = retrieve::query_words(query, skip);
    let mut store = Store::new(owner::caller(), scope);
    let columns = store.columns();
    let hits = lookup::search(&mut store, &phrases, &words, &columns, k, threshold);
    hits.into_iter()
        .filter_map(|h| {
            let col = store.columns.get(&h.column)?;
            Some(Found { relid: col.relid, column: col.column.clone(), value: h.value, score: h.score })
        })
        .collect()
}

/// The columns whose index the searches since the last call left out (a lock not granted in
/// time, a generation being dropped), as `table.column`; the list is emptied.
pub fn take_skipped() -> Vec<String> {
    SKIPPED.with_borrow_mut(std::mem::take)
}

/// The stored value of an indexed column closest to `literal`, for the agent alignment
/// (nl2sql_core::retrieval::lookup::closest decides); None when the column has no index the caller may use.
pub fn closest_stored(relid: pg_sys::Oid, column: &str, literal: &str) -> Option<String> {
    let mut store = Store::new(owner::caller(), Scope::Prompt(&[]));
    let col = store.columns.values().find(|c| c.relid == relid && c.column == column).map(|c| lookup::Column { id: c.id as u32, recheck: c.recheck })?;
    let fuzzy = matches!(store.embedder, Embedder::Builtin);
    lookup::closest(&mut store, &col, literal, fuzzy)
}

/// A column found for a query.
pub struct FoundColumn {
    pub relid: pg_sys::Oid,
    pub column: String,
    pub score: f32,
}

/// Columns whose table and column names (and comments) are similar to the words of `query`,
/// among those the caller may read, none of the tables of `leave_out` (left out inside the
/// searches, before their limits). With an endpoint embedder, descriptions it has not
/// embedded yet (nl2sql.refresh_value_indexes() does) are matched by name only.
pub fn search_columns(query: &str, k: usize, leave_out: &[u32]) -> Vec<FoundColumn> {
    let phrases = retrieve::query_phrases(query);
    if phrases.is_empty() || k == 0 {
        return vec![];
    }
    let caller = owner::caller();
    let emb = embedder::for_columns();
    let qvec = emb.query_vector(query).map(|x| embedder::vector_literal(&x));
    let remote = qvec.is_some();
    let sql = column_sql(remote);
    let sigs: Vec<String> = phrases.iter().map(|p| embed::signature_text(p)).collect();
    let leave_out: Vec<pg_sys::Oid> = leave_out.iter().map(|&o| pg_sys::Oid::from(o)).collect();
    let args = [
        DatumWithOid::from(caller),
        DatumWithOid::from(emb.id().as_str()),
        DatumWithOid::from(sigs),
        DatumWithOid::from(qvec.unwrap_or_default().as_str()),
        DatumWithOid::from(leave_out),
    ];
    let rows: Vec<(pg_sys::Oid, String, String, String, Option<f32>)> = owner::as_owner(|| {
        sandbox::discarded(|| {
            spi::set_local(c"lock_timeout", READ_LOCK_TIMEOUT);
            spi::set_local(c"hnsw.ef_search", &gucs::search_ef().to_string());
            // Columns the caller cannot read must not crowd out those it can (pgvector 0.8).
            spi::set_local_quietly(c"hnsw.iterative_scan", "strict_order");
            spi::rows(&sql, &args, |r| {
                Some((
                    r.get::<pg_sys::Oid>(1).ok()??,
                    r.get::<String>(2).ok()??,
                    r.get::<String>(3).ok()??,
                    r.get::<String>(4).ok()??,
                    r.get::<f32>(5).ok().flatten(),
                ))
            })
        })
        .unwrap_or_default()
    });
    let phrase_features: Vec<_> = phrases.iter().map(|p| embed::features(p)).collect();
    let query_features = embed::features(query);
    let scored: Vec<(FoundColumn, f32, Option<f32>)> = rows
        .into_iter()
        .map(|(relid, column, table, description, cosine)| {
            let names = embed::features(&format!("{table} {column}"));
            let own = embed::features(&column);
            let lexical = phrase_features
                .iter()
                .map(|p| embed::feature_cosine(p, &own).max(0.9 * embed::feature_cosine(p, &names)))
                .fold(0f32, f32::max);
            let about = embed::feature_cosine(&query_features, &embed::features(&description));
            let score = lexical.max(about).max(cosine.unwrap_or(0.0)).min(1.0);
            (FoundColumn { relid, column, score }, lexical.max(about), cosine)
        })
        .collect();
    let by_score = |a: &FoundColumn, b: &FoundColumn| b.score.total_cmp(&a.score).then(a.column.cmp(&b.column));
    if !scored.iter().any(|s| s.2.is_some()) {
        let mut found: Vec<FoundColumn> = scored.into_iter().map(|s| s.0).collect();
        found.sort_by(by_score);
        found.truncate(k);
        return found;
    }
    // Names and meaning are two rankings whose scores do not compare (a sentence model's
    // cosines run lower): reciprocal rank fusion orders by both.
    // Names rank only where they match (the score at which a column joins the extraction's
    // choice); below it a name similarity is noise that would outvote meaning.
    let min = nl2sql_core::pipeline::COLUMN_MATCH_MIN_SCORE;
    let mut fused = retrieve::fuse_ranks(&scored.iter().map(|s| ((s.1 >= min).then_some(s.1), s.2)).collect::<Vec<_>>());
    fused.truncate(k);
    let mut found: Vec<Option<FoundColumn>> = scored.into_iter().map(|s| Some(s.0)).collect();
    fused.into_iter().filter_map(|i| found.get_mut(i).and_then(Option::take)).collect()
}

/// Candidate columns: per query phrase, the readable columns whose names' signatures are
/// nearest (every row has one, whatever its embedder; the HNSW index on signatures serves it,
/// scanning on past the columns the caller cannot read: hnsw.iterative_scan); with vectors (`remote`), also the nearest descriptions by meaning
/// among those the caller may read (filtered inside: another embedder's vectors may have other
/// dimensions, and columns the caller cannot read must not crowd out those it can; the scan
/// is sequential anyway, the vectors having no index).
fn column_sql(remote: bool) -> String {
    let by_name = include_str!("../../../sql/queries/values_search_by_signature.sql");
    let (source, cosine) = if remote {
        (
            format!(
                "({by_name} UNION SELECT v.relid, v.attnum FROM (SELECT relid, attnum FROM nl2sql.column_embeddings x
                 WHERE x.embedder = $2 AND nl2sql._may_read_column($1, x.relid, x.attnum)
                   AND x.relid <> ALL ($5::oid[])
                 ORDER BY x.embedding <=> $4::vector LIMIT 200) v)"
            ),
            "CASE WHEN ce.embedder = $2 THEN (1 OPERATOR(pg_catalog.-) (ce.embedding <=> $4::vector))::float4 END",
        )
    } else {
        (format!("({by_name})"), "NULL::float4")
    };
    format!(
        "SELECT DISTINCT ce.relid, a.attname::text, c.relname::text, ce.description, {cosine}
         FROM {source} k
         JOIN nl2sql.column_embeddings ce ON ce.relid = k.relid AND ce.attnum = k.attnum
         JOIN pg_catalog.pg_attribute a ON a.attrelid = ce.relid AND a.attnum = ce.attnum
         JOIN pg_catalog.pg_class c ON c.oid = ce.relid
         WHERE nl2sql._may_read_column($1, ce.relid, ce.attnum) AND ce.relid <> ALL ($5::oid[])"
    )
}
