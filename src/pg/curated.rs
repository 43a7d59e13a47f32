//! What the curated stores share: the examples library (examples/) and instructions
//! (instructions.rs). Who may write them and what every write checks first ([`Store`]), and
//! which of their rows a role may see ([`readable_by`], [`may_read`]). Each store names itself
//! in its refusals; the rules are here, once.
//!
//! Who may write: curators (members of nl2sql_curator) and superusers, on the primary. Who may
//! read a row: the roles that may read the whole of every relation it concerns (sql/may_read.sql). The stores' views
//! (sql/examples.sql, sql/instructions.sql) filter so for the current role; the writes, which run
//! as the extension's owner, filter so for the caller.

use crate::pg::errors::fail;
use crate::pg::{owner, spi};
use nl2sql_core::error::SqlState;
use pgrx::prelude::*;

/// A curated store, as its refusals describe it.
pub struct Store {
    /// Why only curators write it: the DETAIL of a write refused to another role.
    pub curated_because: &'static str,
    /// The HINT of a write refused to another role.
    pub grant: &'static str,
    /// The DETAIL of a write refused on a hot standby.
    pub written_on_primary: &'static str,
}

impl Store {
    /// The checks before a curator's write (`what`: "add examples"), in this order: the caller
    /// may curate ([`may_curate`]), and the server is not a hot standby.
    pub fn require_writer(&self, what: &str) {
        self.require_curator(what);
        self.require_primary(what);
    }

    fn require_curator(&self, what: &str) {
        if !may_curate(owner::caller()) {
            fail(SqlState::InsufficientPrivilege, format!("permission denied to {what}"), Some(self.curated_because.into()), Some(self.grant));
        }
    }

    fn require_primary(&self, what: &str) {
        // SAFETY: reads shared memory state.
        if unsafe { pg_sys::RecoveryInProgress() } {
            fail(SqlState::ReadOnlySqlTransaction, format!("cannot {what} on a hot standby"), Some(self.written_on_primary.into()), None);
        }
    }
}

/// Whether `role` may curate: a superuser or a member of nl2sql_curator.
pub fn may_curate(role: pg_sys::Oid) -> bool {
    // SAFETY: a catalog lookup of the role.
    if unsafe { pg_sys::superuser_arg(role) } {
        return true;
    }
    spi::read::<bool>(
        "SELECT CASE WHEN pg_catalog.to_regrole('nl2sql_curator') IS NULL THEN false
                     ELSE pg_catalog.pg_has_role($1, 'nl2sql_curator', 'MEMBER') END",
        &[role.into()],
    )
    .unwrap_or(false)
}

/// Whether the role `role` may read all of the relation `relation` (both SQL expressions, OIDs;
/// sql/may_read.sql): the rule behind every privilege filter of the curated stores, whose text
/// may name any column.
pub fn may_read(role: &str, relation: &str) -> String {
    format!("nl2sql._may_read_all({role}, {relation})")
}

/// The condition, on a store's row `s`, that the role `$2` may read every relation the row
/// concerns (`s.relations`): the view's filter, for a given role.
pub fn readable_by() -> String {
    format!(
        "NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                    WHERE NOT coalesce({}, false))",
        may_read("$2::pg_catalog.oid", "r.oid")
    )
}
