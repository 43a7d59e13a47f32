//! Instructions (sql/instructions.sql): curation (add, remove, enable, embed their meanings at
//! refresh) and the search a question's run makes. The choice among what the search returns is
//! the core's (retrieval::instructions).
//!
//! Who may write: curators (members of nl2sql_curator) and superusers; the rows are written as
//! the extension owner with parameters only. Who may read: every role, through the
//! nl2sql.instructions view, which shows only instructions about relations the role may read.
//! Both rules are the curated stores' (curated.rs), shared with the examples library.

use crate::pg::curated::{self, Store};
use crate::pg::errors::fail;
use crate::pg::{owner, sandbox, spi};
use nl2sql_core::error::SqlState;
use nl2sql_core::retrieval::embed;
use nl2sql_core::retrieval::instructions::{self, Instruction, MAX_SQL_BYTES, MAX_TEXT_CHARS};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;

/// null_value_not_allowed.
pub const NULL_VALUE_NOT_ALLOWED: SqlState = SqlState::Other(*b"22004");
/// Most relations one instruction may concern.
const MAX_TABLES: usize = 100;

/// Instructions, as their refusals describe them (the checks are curated.rs's).
const STORE: Store = Store {
    curated_because: "Instructions are shown in the prompts of other roles; only members of nl2sql_curator and superusers curate them.",
    grant: "GRANT nl2sql_curator TO the role that curates instructions.",
    written_on_primary: "Instructions are written on the primary; standbys read them.",
};

/// Checks an instruction's text and fragment; the trimmed text and fragment.
fn validate<'a>(text: &'a str, sql: Option<&'a str>) -> (&'a str, Option<&'a str>) {
    let text = text.trim();
    if text.is_empty() {
        fail(SqlState::InvalidParameterValue, "instruction must not be empty".into(), None, Some("Write the definition or rule in plain language."));
    }
    let chars = text.chars().take(MAX_TEXT_CHARS + 1).count();
    if chars > MAX_TEXT_CHARS {
        fail(
            SqlState::ProgramLimitExceeded,
            format!("instruction is too long (more than {MAX_TEXT_CHARS} characters)"),
            Some("Every chosen instruction goes into the prompts of the questions it concerns.".into()),
            Some("Split it into shorter instructions, one definition or rule each."),
        );
    }
    let sql = sql.map(str::trim).filter(|s| !s.is_empty());
    if let Some(s) = sql.filter(|s| s.len() > MAX_SQL_BYTES) {
        fail(SqlState::ProgramLimitExceeded, format!("instruction's SQL fragment is too long ({} bytes, at most {MAX_SQL_BYTES})", s.len()), None, None);
    }
    (text, sql)
}

/// The kinds of relation an instruction may concern, and the schemas it may not.
const QUERYABLE: &str = "c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f}'::pg_catalog.\"char\"[])
               AND n.nspname OPERATOR(pg_catalog.<>) ALL ('{pg_catalog,information_schema,nl2sql}'::pg_catalog.name[])";

/// The relations an instruction concerns: those given, or else those its text and fragment
/// name (as the caller's search_path finds them, or written with their schema). Each must be
/// a permanent table, view or foreign table the caller may read: an instruction is shown only
/// to the roles that may read all of them, so nothing is dropped from the list silently. Found
/// ones are named in a NOTICE; finding none is an error (`tables => '{}'` says the instruction
/// is about the whole database).
fn relations(tables: Option<Vec<Option<pg_sys::Oid>>>, text: &str, sql: Option<&str>) -> Vec<pg_sys::Oid> {
    let caller = owner::caller();
    let derived = tables.is_none();
    let oids: Vec<pg_sys::Oid> = match tables {
        Some(given) => {
            if given.iter().any(Option::is_none) {
                fail(NULL_VALUE_NOT_ALLOWED, "tables must not contain nulls".into(), None, Some("Pass NULL instead of the array to use the tables the instruction names."));
            }
            if given.len() > MAX_TABLES {
                fail(SqlState::ProgramLimitExceeded, format!("an instruction concerns at most {MAX_TABLES} relations ({} given)", given.len()), None, None);
            }
            given.into_iter().flatten().collect()
        }
        None => {
            let names = instructions::named(&format!("{text}\n{}", sql.unwrap_or("")));
            let sql = format!(
                "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
                 WHERE {QUERYABLE}
                   AND ((c.relname OPERATOR(pg_catalog.=) ANY ($1) AND pg_catalog.pg_table_is_visible(c.oid))
                        OR (n.nspname OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) c.relname) OPERATOR(pg_catalog.=) ANY ($1))"
            );
            spi::rows(&sql, &[names.into()], |r| r.get::<pg_sys::Oid>(1).ok().flatten())
        }
    };
    let mut oids = oids;
    oids.sort_unstable_by_key(|o| u32::from(*o));
    oids.dedup();
    let mut names = Vec::with_capacity(oids.len());
    // Whether the caller may read it: as the view's filter asks of the roles shown it.
    let may_read = curated::may_read("$2::pg_catalog.oid", "c.oid");
    let check = format!(
        "SELECT c.oid::pg_catalog.regclass::pg_catalog.text, c.relpersistence OPERATOR(pg_catalog.=) 't', {QUERYABLE},
                {may_read}
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
         WHERE c.oid OPERATOR(pg_catalog.=) $1"
    );
    for &oid in &oids {
        check_for_interrupts!();
        let row = spi::read_row(&check, &[oid.into(), caller.into()], |r| {
            Some((r.get::<String>(1).ok()??, r.get::<bool>(2).ok()??, r.get::<bool>(3).ok()??, r.get::<bool>(4).ok()??))
        });
        let hint = derived.then_some("Pass tables => ARRAY[...]::regclass[] naming the relations the instruction concerns.");
        match row {
            None => fail(SqlState::UndefinedTable, format!("relation with OID {} does not exist", u32::from(oid)), None, None),
            Some((name, true, ..)) => fail(
                SqlState::FeatureNotSupported,
                format!("an instruction cannot concern temporary relation {name}"),
                Some("Instructions outlive the session; a temporary relation does not.".into()),
                None,
            ),
            Some((name, _, false, _)) => fail(
                SqlState::Other(*b"42809"),
                format!("an instruction cannot concern {name}"),
                Some("Instructions concern tables, views and foreign tables outside the system schemas.".into()),
                None,
            ),
            Some((name, _, _, false)) => fail(
                SqlState::InsufficientPrivilege,
                format!("permission denied for table {name}"),
                Some(if derived { "The instruction names it; a curator attaches instructions only to relations it may read." } else { "A curator attaches instructions only to relations it may read." }.into()),
                hint,
            ),
            Some((name, ..)) => names.push(name),
        }
    }
    if derived {
        if names.is_empty() {
            fail(
                SqlState::InvalidParameterValue,
                "instruction names no table".into(),
                Some("Without tables, an instruction concerns the relations its text names, and it names none the search_path finds.".into()),
                Some("Pass tables => ARRAY[...]::regclass[] naming the relations it concerns, or tables => '{}' for an instruction about the whole database."),
            );
        }
        note!("nl2sql: the instruction concerns {}", names.join(", "));
    }
    oids
}

/// The sentence model's vector of a text when nl2sql.column_embedder is minilm (a pgvector
/// literal); None otherwise.
fn meaning(text: &str) -> Option<String> {
    crate::pg::examples::meaning(&[text.to_string()]).and_then(|mut v| v.pop())
}

/// What the embedders read of an instruction: its text and fragment.
fn embedded(text: &str, sql: Option<&str>) -> String {
    match sql {
        Some(s) => format!("{text}\n{s}"),
        None => text.to_string(),
    }
}

/// nl2sql.add_instruction(): the new instruction's id.
pub fn add(text: &str, tables: Option<Vec<Option<pg_sys::Oid>>>, sql: Option<&str>) -> i64 {
    STORE.require_writer("add instructions");
    let (text, sql) = validate(text, sql);
    let reads = relations(tables, text, sql);
    let body = embedded(text, sql);
    let v = crate::pg::embedder::vector_literal(&embed::embed(&body, embed::BUILTIN_DIMS));
    let meaning = meaning(&body);
    let by = owner::caller();
    owner::as_owner(|| {
        spi::write_one::<i64>(
            "INSERT INTO nl2sql.instruction_store (instruction, sql, relations, added_by, embedding, meaning)
             VALUES ($1, $2, $3::pg_catalog.oid[]::pg_catalog.regclass[], $4, $5::text::vector, $6::text::vector) RETURNING id",
            &[text.into(), sql.into(), DatumWithOid::from(reads), by.into(), v.as_str().into(), meaning.into()],
        )
    })
    .unwrap_or_else(|| fail(SqlState::InternalError, "instruction was not stored".into(), None, None))
}

/// nl2sql.remove_instruction(): whether it existed among those the caller may see (a curator
/// cannot touch an instruction about relations it may not read, nor learn that it exists).
pub fn remove(id: i64) -> bool {
    STORE.require_writer("remove instructions");
    let caller = owner::caller();
    let sql = format!("DELETE FROM nl2sql.instruction_store s WHERE s.id = $1 AND {} RETURNING s.id", curated::readable_by());
    owner::as_owner(|| spi::write_one::<i64>(&sql, &[id.into(), caller.into()])).is_some()
}

/// nl2sql.enable_instruction(): whether it exists among those the caller may see.
pub fn set_enabled(id: i64, enabled: bool) -> bool {
    STORE.require_writer("enable or disable instructions");
    let caller = owner::caller();
    let sql = format!("UPDATE nl2sql.instruction_store s SET enabled = $3 WHERE s.id = $1 AND {} RETURNING s.id", curated::readable_by());
    owner::as_owner(|| spi::write_one::<i64>(&sql, &[id.into(), caller.into(), enabled.into()])).is_some()
}

/// Computes the sentence model's vector of every instruction that has none (minilm only), as
/// the extension's owner; how many.
pub fn embed_meanings() -> usize {
    crate::pg::examples::embed_missing(
        "SELECT id, instruction OPERATOR(pg_catalog.||) coalesce(E'\\n' OPERATOR(pg_catalog.||) sql, '')
         FROM nl2sql.instruction_store WHERE meaning IS NULL ORDER BY id",
        "UPDATE nl2sql.instruction_store s SET meaning = x.m::vector
         FROM ROWS FROM (pg_catalog.unnest($1::int8[]), pg_catalog.unnest($2::text[])) AS x(id, m) WHERE s.id = x.id",
    )
}

/// The enabled instructions the current role may see, nearest `question` in meaning first (at
/// most instructions::MAX_CANDIDATES), with their similarity; read-only, so it works on a hot
/// standby. Never fails a question: an error reading them leaves them out.
pub fn candidates(question: &str) -> Vec<Instruction> {
    let v = crate::pg::embedder::vector_literal(&embed::embed(question, embed::BUILTIN_DIMS));
    let vs = crate::pg::examples::vector_schema();
    // With the sentence model, those it embedded come first (its scale of similarity is not
    // the built-in embedder's), as the examples library ranks.
    let sql = format!(
        "SELECT id, instruction, sql, (1 OPERATOR(pg_catalog.-) d)::pg_catalog.float4,
                ($3::pg_catalog.text IS NOT NULL AND meaning IS NOT NULL)
         FROM (SELECT *, CASE WHEN $3::pg_catalog.text IS NOT NULL AND meaning IS NOT NULL
                              THEN meaning OPERATOR({vs}.<=>) $3::pg_catalog.text::{vs}.vector
                              ELSE embedding OPERATOR({vs}.<=>) $1::pg_catalog.text::{vs}.vector END AS d
               FROM nl2sql.instructions WHERE enabled) i
         ORDER BY ($3::pg_catalog.text IS NOT NULL AND meaning IS NULL), d, id LIMIT $2"
    );
    sandbox::savepoint(|| {
        // Most databases have none: no sentence-model pass for them.
        if !spi::read::<bool>("SELECT EXISTS (SELECT FROM nl2sql.instructions WHERE enabled)", &[]).unwrap_or(false) {
            return Vec::new();
        }
        let by_meaning = meaning(question);
        spi::rows(&sql, &[v.as_str().into(), (instructions::MAX_CANDIDATES as i64).into(), by_meaning.into()], |r| {
            Some(Instruction {
                id: r.get::<i64>(1).ok()??,
                text: r.get::<String>(2).ok()??,
                sql: r.get::<String>(3).ok()?,
                meaning: r.get::<f32>(4).ok()??,
                sentence: r.get::<bool>(5).ok()??,
                words: 0.0,
                score: 0.0,
            })
        })
    })
    .unwrap_or_default()
}
