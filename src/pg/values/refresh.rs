//! Keeping value indexes current between builds, off the read path: rebuilding the columns
//! marked stale or dirty, removing the values DML took away that no row holds any more,
//! embedding what DML queued for an endpoint embedder (values, and new columns' descriptions),
//! and dropping the generations builds replaced once no snapshot can use them.
//! nl2sql.refresh_value_indexes() runs all of it; a scheduler (pg_cron, cron with psql) can call it.

use super::{entries_table, may_maintain, relation_text, still_held, within, Built, TableClock};
use crate::pg::{embedder, owner, relation, spi};
use nl2sql_core::retrieval::embedder::Embedder;
use nl2sql_core::retrieval::lookup;
use pgrx::prelude::*;
use std::collections::HashMap;

/// Queued values embedded per refresh.
const QUEUE_BATCH: i64 = 100_000;

/// Rebuilds the value indexes that are stale, dirty or built by another embedder (all of
/// `rel`'s when given), applies removals, embeds queued values and collects old generations.
pub fn refresh(rel: Option<pg_sys::Oid>) -> Vec<Built> {
    let caller = owner::caller();
    // Each table's parts, removals and rebuilds, share its nl2sql.refresh_table_timeout.
    let mut clock = TableClock::new();
    collect_garbage(&mut clock);
    apply_removals(rel, &mut clock);
    // Indexes pg_restore brought back find their columns by name before they are built.
    // What pg_dump keeps agrees with the indexes again after a load that ran without triggers.
    owner::as_owner(|| spi::write("SELECT nl2sql._value_index_saved_reconcile()", &[]));
    owner::as_owner(|| spi::write("SELECT nl2sql._renumber_restored()", &[]));
    let todo: Vec<(pg_sys::Oid, String, bool)> = owner::as_owner(|| {
        spi::rows(
            include_str!("../../../sql/queries/values_refresh_columns.sql"),
            &[rel.into()],
            |r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<String>(2).ok()??, r.get::<bool>(3).ok()??)),
        )
    });
    let mut out = Vec::new();
    for (relid, column, include_rls) in todo {
        check_for_interrupts!();
        if !may_maintain(relid, caller) {
            continue;
        }
        if rel.is_some() {
            // The caller named her table: its errors end the statement, raised as nl2sql's
            // naming her table; a cancel her code catches still ends the statement.
            out.extend(super::in_named_read(relid, || super::rebuild(relid, &column, include_rls)));
            continue;
        }
        // One table that cannot be read (its owner revoked their own SELECT, a lock, a policy
        // that raises or sleeps) must not undo or hold up the refresh of every other one.
        match clock.kept(relid, || super::rebuild(relid, &column, include_rls)) {
            Ok(built) => out.extend(built),
            Err(failure) => alert!(
                "nl2sql could not rebuild the value index of {}.{}{}; its previous generation goes on serving",
                relation_text(relid),
                relation::display_ident(&column),
                within(Some(&failure))
            ),
        }
    }
    let embedder = embedder::for_stored_values();
    let columns = embedder::for_columns();
    owner::as_owner(|| {
        if let Embedder::Remote(ep) = &embedder {
            drain_queue(ep);
        }
        // New and changed relations (with the built-in embedder: every row's signature as
        // its embedding); with vectors, then every description not yet in this embedder's.
        spi::write("SELECT nl2sql._refresh_column_embeddings(NULL)", &[]);
        if !matches!(columns, embedder::Columns::Values(Embedder::Builtin)) {
            embed_pending_columns(&columns);
            // The examples library's masked questions, with the same model.
            crate::pg::examples::embed_meanings();
            crate::pg::instructions::embed_meanings();
        }
    });
    out
}

/// Removes from the index the values DML took away that no row holds any more (all columns, or
/// those of `rel`): each table is read as its owner (restricted), the index written as the
/// extension's owner. Columns a build holds are left for later.
fn apply_removals(rel: Option<pg_sys::Oid>, clock: &mut TableClock) {
    let pending: Vec<(i32, i32, pg_sys::Oid, String, Vec<String>, i16)> = owner::as_owner(|| {
        spi::rows(
            include_str!("../../../sql/queries/values_refresh_apply_removals.sql"),
            &[rel.into()],
            |r| {
                Some((
                    r.get::<i32>(1).ok()??,
                    r.get::<i32>(2).ok()??,
                    r.get::<pg_sys::Oid>(3).ok()??,
                    r.get::<String>(4).ok()??,
                    r.get::<Vec<String>>(5).ok()??,
                    r.get::<i16>(6).ok()??,
                ))
            },
        )
    });
    let caller = owner::caller();
    for (id, generation, relid, column, values, attnum) in pending {
        check_for_interrupts!();
        // Only tables the caller may maintain (superuser, or the table's owner).
        if !may_maintain(relid, caller) {
            continue;
        }
        // One table's trouble (its policy fails, say) skips that column, not the refresh.
        let held = match still_held(relid, attnum, &values, clock) {
            Ok(held) => held,
            Err(why) => {
                alert!("nl2sql could not re-check the removed values of {}.{}{}", relation_text(relid), relation::display_ident(&column), within(why.as_ref()));
                continue;
            }
        };
        let gone: Vec<String> = values.iter().filter(|v| !held.contains(v)).cloned().collect();
        owner::as_owner(|| {
            // A build holding the row switches generations: leave this column for later.
            let mine = spi::write_one::<bool>("SELECT true FROM nl2sql.value_index WHERE id = $1 AND generation = $2 FOR NO KEY UPDATE SKIP LOCKED", &[id.into(), generation.into()]);
            if mine.is_none() {
                return;
            }
            let table = entries_table(id, generation);
            spi::write(
                &format!(
                    "DELETE FROM {table} e USING pg_catalog.unnest($1::text[]) AS g(v)
                     WHERE e.value = g.v AND (e.key = nl2sql.fold(g.v) OR e.key = ANY (nl2sql.phrases(g.v)))"
                ),
                &[gone.into()],
            );
            spi::write("DELETE FROM nl2sql.value_removals WHERE column_id = $1 AND value = ANY ($2)", &[id.into(), values.into()]);
            spi::write("UPDATE nl2sql.value_index SET refreshed_at = now() WHERE id = $1", &[id.into()]);
        });
    }
}

/// Embeds values that DML queued for endpoint-embedded columns.
fn drain_queue(ep: &nl2sql_core::model::http::Endpoint) {
    let queued: Vec<(i32, i32, String)> = spi::rows(
        "SELECT q.column_id, i.generation, q.value FROM nl2sql.value_queue q JOIN nl2sql.value_index i ON i.id = q.column_id
         WHERE i.embedder = $1 AND i.status IN ('ready', 'dirty')
         ORDER BY q.column_id LIMIT $2",
        &[Embedder::Remote(ep.clone()).id().as_str().into(), QUEUE_BATCH.into()],
        |r| Some((r.get::<i32>(1).ok()??, r.get::<i32>(2).ok()??, r.get::<String>(3).ok()??)),
    );
    let mut by_column: HashMap<(i32, i32), Vec<String>> = HashMap::new();
    for (id, generation, v) in queued {
        by_column.entry((id, generation)).or_default().push(v);
    }
    for ((id, generation), values) in by_column {
        check_for_interrupts!();
        let mine = spi::write_one::<bool>("SELECT true FROM nl2sql.value_index WHERE id = $1 AND generation = $2 FOR NO KEY UPDATE SKIP LOCKED", &[id.into(), generation.into()]);
        if mine.is_none() {
            continue;
        }
        super::entries::insert_remote(&entries_table(id, generation), ep, &lookup::entries(&values));
        spi::write("DELETE FROM nl2sql.value_queue WHERE column_id = $1 AND value = ANY ($2)", &[id.into(), values.into()]);
        spi::write("UPDATE nl2sql.value_index SET refreshed_at = now() WHERE id = $1", &[id.into()]);
    }
}

/// Embeds the schema descriptions that the column embedder (an endpoint, or the in-database
/// model) has not seen yet.
pub(super) fn embed_pending_columns(columns: &embedder::Columns) {
    let id = columns.id();
    let pending: Vec<(pg_sys::Oid, i16, String)> = spi::rows(
        "SELECT relid, attnum, description FROM nl2sql.column_embeddings WHERE embedder <> $1",
        &[id.as_str().into()],
        |r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<i16>(2).ok()??, r.get::<String>(3).ok()??)),
    );
    if pending.is_empty() {
        return;
    }
    let texts: Vec<String> = pending.iter().map(|p| p.2.clone()).collect();
    let Some(vectors) = columns.vectors(&texts) else { return };
    let relids: Vec<pg_sys::Oid> = pending.iter().map(|p| p.0).collect();
    let attnums: Vec<i16> = pending.iter().map(|p| p.1).collect();
    let lits: Vec<String> = vectors.iter().map(|v| embedder::vector_literal(v)).collect();
    spi::write(
        "UPDATE nl2sql.column_embeddings ce SET embedding = x.e::vector, embedder = $4
         FROM ROWS FROM (pg_catalog.unnest($1::oid[]), pg_catalog.unnest($2::int2[]), pg_catalog.unnest($3::text[])) AS x(relid, attnum, e)
         WHERE ce.relid = x.relid AND ce.attnum = x.attnum",
        &[relids.into(), attnums.into(), lits.into(), id.as_str().into()],
    );
}

/// The oldest transaction ID a snapshot of any session (or, with hot_standby_feedback, of a
/// standby) may still consider running: a generation retired by a transaction before it is
/// seen retired by every snapshot.
fn horizon() -> i64 {
    // SAFETY: reads the procarray's horizon and the next transaction ID.
    let (oldest, next) = unsafe {
        (pg_sys::GetOldestNonRemovableTransactionId(std::ptr::null_mut()), pg_sys::ReadNextFullTransactionId())
    };
    // The full ID of `oldest`: in the epoch of `next`, or the one before when it wrapped.
    let next = next.value;
    let epoch = next >> 32;
    let low = u32::from(oldest) as u64;
    let full = if low <= (next & 0xffff_ffff) { (epoch << 32) | low } else { (epoch.saturating_sub(1) << 32) | low };
    full as i64
}

/// Drops the generations builds replaced (and those of dropped indexes) once every snapshot
/// sees them retired, after copying to the generation serving what DML added to them after the
/// build's last look (each table within what is left of its time on `clock`). A generation
/// some session still reads is left for the next call.
pub fn collect_garbage(clock: &mut TableClock) {
    let caller = owner::caller();
    owner::as_owner(|| {
        let horizon = horizon();
        let retired: Vec<(i32, i32, Option<i32>)> = spi::rows(
            "SELECT g.column_id, g.generation, i.generation FROM nl2sql.value_generations g
             LEFT JOIN nl2sql.value_index i ON i.id = g.column_id
             WHERE g.retired_xid < $1 ORDER BY 1, 2",
            &[horizon.into()],
            |r| Some((r.get::<i32>(1).ok()??, r.get::<i32>(2).ok()??, r.get::<i32>(3).ok()?)),
        );
        for (id, generation, current) in retired {
            check_for_interrupts!();
            let old = entries_table(id, generation);
            let done = crate::pg::sandbox::savepoint(|| {
                if let Some(current) = current {
                    // Copying what DML added reads the table as its owner: only for the tables
                    // the caller may maintain; the others wait for their owner's call.
                    let relid = spi::read::<pg_sys::Oid>("SELECT relid::oid FROM nl2sql.value_index WHERE id = $1", &[id.into()]);
                    if !relid.is_some_and(|r| may_maintain(r, caller)) {
                        return false;
                    }
                    // Serialised with builds, which switch generations.
                    let claimed = spi::write_row(
                        "SELECT i.relid::oid, i.attnum FROM nl2sql.value_index i
                         WHERE i.id = $1 AND i.generation = $2 FOR NO KEY UPDATE OF i SKIP LOCKED",
                        &[id.into(), current.into()],
                        |r| Some((r.get::<pg_sys::Oid>(1).ok()??, r.get::<i16>(2).ok()??)),
                    );
                    let Some((relid, attnum)) = claimed else { return false };
                    let emb = embedder::for_stored_values();
                    let same_embedder = spi::read::<bool>("SELECT embedder = nl2sql.current_embedder() FROM nl2sql.value_index WHERE id = $1", &[id.into()]).unwrap_or(false);
                    if same_embedder {
                        super::entries::catch_up(id, relid, attnum, &old, &entries_table(id, current), &emb, clock);
                    }
                }
                if spi::read::<bool>("SELECT pg_catalog.to_regclass($1) IS NOT NULL", &[old.as_str().into()]).unwrap_or(false) {
                    // Never waits for a search that still reads it.
                    spi::write(&format!("LOCK TABLE {old} IN ACCESS EXCLUSIVE MODE NOWAIT"), &[]);
                    spi::write(&format!("ALTER EXTENSION nl2sql DROP TABLE {old}"), &[]);
                    spi::write(&format!("DROP TABLE {old}"), &[]);
                }
                spi::write("DELETE FROM nl2sql.value_generations WHERE column_id = $1 AND generation = $2", &[id.into(), generation.into()]);
                true
            });
            match done {
                Some(true) => {}
                Some(false) => debug1!("nl2sql: generation {generation} of value index {id} is still in use; dropped later"),
                // An error (an endpoint's timeout while DML's values were copied, a lock): rolled
                // back, and tried again by the next refresh; whatever it was, it is passed over.
                None => {
                    owner::passed_over();
                    alert!("nl2sql could not drop generation {generation} of value index {id}; the next refresh tries again")
                }
            }
        }
    })
}
