//! The function policy: which functions generated SQL may call, decided on what the catalog says
//! about one resolved function (its OID's row), never on a name as the text spells it.
//!
//! The extension collects the facts of every function PostgreSQL's analysed and rewritten tree
//! reaches (directly, through operators, casts, attribute notation, views, domain constraints,
//! aggregates' support functions, type output) and asks [`judge`]; its object-access hook asks
//! again for every function the executor initialises while generated SQL runs.

use super::refusal::GuardError;

/// What the catalog says about one function (one `pg_proc` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionFacts {
    pub oid: u32,
    pub schema: String,
    pub name: String,
    /// `pg_proc.provolatile`: 'i', 's' or 'v'.
    pub volatility: char,
    /// Created by initdb (OID below FirstNormalObjectId).
    pub builtin: bool,
    /// The extension the function belongs to, if any.
    pub extension: Option<String>,
    /// Its owner is a superuser (an extension's script, or initdb).
    pub owner_is_superuser: bool,
}

impl FunctionFacts {
    /// `schema.name`, as messages show it.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// Shipped with PostgreSQL or with an extension a superuser installed: what it declares
    /// (its volatility) can be believed. A function an extension's owner added to a trusted
    /// extension keeps that owner, so it does not count.
    pub fn is_system(&self) -> bool {
        self.owner_is_superuser && (self.builtin || self.extension.is_some())
    }
}

/// Who is running code, and so which functions may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The model's SQL: system functions that are not volatile and not denied, volatile ones on
    /// a short list, and what a superuser allow-listed; nothing of nl2sql's own.
    Generated,
    /// nl2sql's own reads of user relations as the caller (sampling, value re-checks): the same,
    /// except the helpers these reads call (nl2sql._sample_columns, nl2sql._value_exists, and
    /// nl2sql._inspecting, with which both refuse to run anywhere else).
    Inspect,
    /// nl2sql acting as the extension's owner: system functions only, so nothing another role
    /// wrote runs with the owner's rights.
    Elevated,
    /// nl2sql's own catalog queries, as the caller and under the caller's search_path: system
    /// functions only, whatever operator or function that path would resolve to.
    Catalog,
}

/// nl2sql's own functions its reads of user relations call.
const INSPECT_HELPERS: &[&str] = &["_sample_columns", "_value_exists", "_inspecting"];

/// Volatile system functions without side effects that questions legitimately need.
pub const VOLATILE_ALLOWED: &[&str] =
    &["random", "random_normal", "clock_timestamp", "timeofday", "gen_random_uuid"];

/// Built-in functions never allowed in generated SQL, whatever their volatility, and why.
/// Names ending in '*' are prefixes. Matched only against functions of pg_catalog.
pub const DENIED_BUILTINS: &[(&str, &str)] = &[
    ("pg_terminate_backend", "ends other sessions"),
    ("pg_cancel_backend", "cancels other sessions' queries"),
    ("pg_signal_backend", "signals other sessions"),
    ("pg_stat_get_activity", "reads other sessions' queries"),
    ("pg_stat_get_backend_*", "reads other sessions' queries and state"),
    ("pg_stat_get_progress_info", "reads other sessions' progress"),
    ("pg_stat_get_wal_senders", "reads replication connections"),
    ("pg_stat_get_wal_receiver", "reads replication connections"),
    ("pg_stat_get_subscription*", "reads replication connections"),
    ("pg_get_replication_slots", "reads replication state"),
    ("pg_stat_get_replication_slot", "reads replication state"),
    ("pg_stat_get_archiver", "reads the server's archiving state"),
    ("inet_client_*", "reveals network addresses"),
    ("inet_server_*", "reveals network addresses"),
    ("pg_tablespace_location", "reveals server paths"),
    ("pg_relation_filepath", "reveals server paths"),
    ("pg_config", "reveals the server's build and paths"),
    ("pg_get_loaded_modules", "reveals the server's loaded libraries"),
    ("pg_get_object_address", "prints the names it is given unquoted in its errors"),
    ("pg_lock_status", "reads other sessions' locks"),
    ("pg_blocking_pids", "reads other sessions' locks"),
    ("pg_safe_snapshot_blocking_pids", "reads other sessions' locks"),
    ("pg_isolation_test_session_is_blocked", "reads other sessions' locks"),
    ("pg_prepared_xact", "reads prepared transactions"),
    ("pg_prepared_statement", "reads the session's prepared statements"),
    ("pg_cursor", "reads the session's open cursors"),
    ("pg_current_snapshot", "reveals running transactions"),
    ("txid_current_snapshot", "reveals running transactions"),
    ("pg_get_backend_memory_contexts", "reads the session's state"),
    ("pg_reload_conf", "reloads the server configuration"),
    ("pg_rotate_logfile", "rotates the server log"),
    ("pg_current_logfile", "reveals server files"),
    ("pg_promote", "promotes a standby"),
    ("pg_switch_wal", "forces a WAL switch"),
    ("pg_log_backend_memory_contexts", "writes to the server log"),
    ("set_config", "changes settings"),
    ("current_setting", "reads settings, which may hold secrets"),
    ("pg_settings_get_flags", "reads settings"),
    ("pg_show_all_settings", "reads settings, which may hold secrets"),
    ("pg_show_all_file_settings", "reads the configuration files"),
    ("pg_hba_file_rules", "reads the configuration files"),
    ("pg_ident_file_mappings", "reads the configuration files"),
    ("pg_sleep*", "only waits"),
    ("pg_notify", "sends notifications"),
    ("pg_listening_channels", "reads the session's state"),
    ("pg_advisory*", "takes advisory locks"),
    ("pg_try_advisory*", "takes advisory locks"),
    ("lo_*", "reads or writes large objects and server files"),
    ("loread", "reads large objects"),
    ("lowrite", "writes large objects"),
    ("pg_read_*", "reads server files"),
    ("pg_ls_*", "lists server directories"),
    ("pg_stat_file", "reads server file metadata"),
    ("pg_file_*", "writes server files"),
    ("pg_logical_*", "uses replication slots"),
    ("pg_replication_*", "changes replication state"),
    ("pg_create_*", "creates replication slots or restore points"),
    ("pg_drop_*", "drops replication slots"),
    ("pg_copy_*", "copies replication slots"),
    ("pg_export_snapshot", "exports snapshots"),
    ("pg_import_system_collations", "changes the catalog"),
    ("pg_stat_reset*", "resets statistics"),
    ("pg_stat_clear_snapshot", "changes the session's statistics snapshot"),
    ("pg_backup_*", "controls backups"),
    ("pg_start_backup", "controls backups"),
    ("pg_stop_backup", "controls backups"),
    ("pg_wal_replay_*", "controls recovery"),
    ("pg_current_xact_id", "assigns a transaction ID"),
    ("txid_current", "assigns a transaction ID"),
    ("nextval", "advances a sequence"),
    ("setval", "changes a sequence"),
    ("currval", "reads the session's sequence state"),
    ("lastval", "reads the session's sequence state"),
    ("setseed", "changes the session's random state"),
    ("query_to_xml*", "runs SQL given as text"),
    ("query_to_xmlschema", "runs SQL given as text"),
    ("cursor_to_xml*", "reads cursors"),
    ("table_to_xml*", "dumps whole tables"),
    ("schema_to_xml*", "dumps whole schemas"),
    ("database_to_xml*", "dumps the whole database"),
    ("ts_stat", "runs SQL given as text"),
    ("ts_rewrite", "runs SQL given as text"),
];

/// Extensions none of whose functions generated SQL may call, allow-listed or not: they reach
/// other connections, the network, files, raw pages, locks, other sessions' statements, waits
/// and plans, the server's processes, or run SQL given as text.
pub const DENIED_EXTENSIONS: &[&str] = &[
    "dblink",
    "postgres_fdw",
    "file_fdw",
    "adminpack",
    "lo",
    "pageinspect",
    "pg_buffercache",
    "pg_prewarm",
    "pgrowlocks",
    "pgstattuple",
    "pg_visibility",
    "pg_freespacemap",
    "amcheck",
    "pg_surgery",
    "pg_walinspect",
    "old_snapshot",
    "tablefunc",
    "xml2",
    "pg_stat_statements",
    "pg_stat_monitor",
    "pg_stat_kcache",
    "pg_qualstats",
    "pg_wait_sampling",
    "pg_show_plans",
    "pg_proctab",
    "system_stats",
    "pgsentinel",
    "pg_store_plans",
    "pg_stat_plans",
    "pg_query_state",
    "pg_track_settings",
    "powa",
    "pg_profile",
    "pg_logicalinspect",
    "sslinfo",
    "http",
    "pg_net",
    "pg_background",
    "aws_s3",
    "aws_lambda",
    "pg_cron",
    "plpgsql_check",
];

/// Why a built-in function of this name is denied, if it is.
pub fn denied_builtin(name: &str) -> Option<&'static str> {
    DENIED_BUILTINS.iter().find_map(|(pat, why)| {
        let hit = match pat.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *pat,
        };
        hit.then_some(*why)
    })
}

/// Whether `allowed` (nl2sql.allowed_functions: names or schema-qualified names) lists `f`.
fn allow_listed(f: &FunctionFacts, allowed: &[String]) -> bool {
    allowed.iter().any(|a| {
        let a = a.trim();
        match a.rsplit_once('.') {
            Some((schema, name)) => schema == f.schema && name == f.name,
            None => a == f.name,
        }
    })
}

/// The refusal of a function of the deny-list or of a denied extension.
fn denied(f: &FunctionFacts) -> Option<GuardError> {
    let reason = if f.builtin && f.schema == "pg_catalog" { denied_builtin(&f.name) } else { None };
    let reason = reason.or_else(|| {
        f.extension.as_deref().is_some_and(|e| DENIED_EXTENSIONS.contains(&e)).then_some(
            "belongs to an extension that reaches outside this query (other connections, files, pages, or SQL given as text)",
        )
    })?;
    Some(GuardError::ForbiddenFunction { function: f.qualified(), reason })
}

/// Whether `f` may run in `scope`; the error says why not.
pub fn judge(f: &FunctionFacts, scope: Scope, allowed: &[String]) -> Result<(), GuardError> {
    let ours = f.extension.as_deref() == Some("nl2sql");
    if matches!(scope, Scope::Elevated | Scope::Catalog) {
        return if f.is_system() { Ok(()) } else { Err(GuardError::UntrustedFunction(f.qualified())) };
    }
    if ours {
        if scope == Scope::Inspect && f.schema == "nl2sql" && INSPECT_HELPERS.contains(&f.name.as_str()) {
            return Ok(());
        }
        return Err(GuardError::ForbiddenFunction { function: f.qualified(), reason: "calls nl2sql itself" });
    }
    if let Some(e) = denied(f) {
        return Err(e);
    }
    if allow_listed(f, allowed) {
        return Ok(());
    }
    if !f.is_system() {
        return Err(GuardError::UntrustedFunction(f.qualified()));
    }
    if f.volatility == 'v' && !(f.builtin && VOLATILE_ALLOWED.contains(&f.name.as_str())) {
        return Err(GuardError::VolatileFunction(f.qualified()));
    }
    Ok(())
}

/// Whether the planner may call `f` itself, in `scope`: the function of an operator it
/// estimates (or of that operator's negator or commutator), a range type's support function.
/// Such a call comes from an operator or type some role wrote, whoever's query it is: what
/// [`judge`] allows, but never a function of the deny-list or of a denied extension, even in
/// the scopes of nl2sql's own queries (which trust every built-in), and there never a volatile
/// one either (no built-in operator's or range's function is).
pub fn judge_planner_call(f: &FunctionFacts, scope: Scope, allowed: &[String]) -> Result<(), GuardError> {
    if let Some(e) = denied(f) {
        return Err(e);
    }
    if matches!(scope, Scope::Elevated | Scope::Catalog) && f.volatility == 'v' {
        return Err(GuardError::VolatileFunction(f.qualified()));
    }
    judge(f, scope, allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin(name: &str, volatility: char) -> FunctionFacts {
        FunctionFacts {
            oid: 1,
            schema: "pg_catalog".into(),
            name: name.into(),
            volatility,
            builtin: true,
            extension: None,
            owner_is_superuser: true,
        }
    }

    fn user(schema: &str, name: &str, volatility: char, superuser: bool) -> FunctionFacts {
        FunctionFacts {
            oid: 20000,
            schema: schema.into(),
            name: name.into(),
            volatility,
            builtin: false,
            extension: None,
            owner_is_superuser: superuser,
        }
    }

    fn ext(e: &str, name: &str, volatility: char, superuser: bool) -> FunctionFacts {
        FunctionFacts { extension: Some(e.into()), ..user("public", name, volatility, superuser) }
    }

    #[test]
    fn immutable_and_stable_builtins_run() {
        for f in ["upper", "count", "date_trunc", "now", "textlen", "int4pl"] {
            assert_eq!(judge(&builtin(f, 's'), Scope::Generated, &[]), Ok(()), "{f}");
        }
        assert_eq!(judge(&builtin("random", 'v'), Scope::Generated, &[]), Ok(()));
    }

    #[test]
    fn denied_builtins_are_refused_whatever_they_declare() {
        for (f, v) in [("pg_terminate_backend", 'v'), ("current_setting", 's'), ("query_to_xml", 's'), ("pg_read_file", 'v'), ("pg_advisory_lock", 'v'), ("ts_stat", 'v'), ("pg_stat_get_backend_activity", 's'), ("pg_stat_get_activity", 's'), ("pg_lock_status", 'v'), ("pg_stat_get_progress_info", 's'), ("pg_prepared_statement", 's'), ("pg_cursor", 's'), ("pg_current_snapshot", 's'), ("pg_blocking_pids", 'v'), ("pg_prepared_xact", 'v'), ("pg_stat_get_wal_senders", 's'), ("pg_get_replication_slots", 's'), ("pg_stat_get_wal_receiver", 's'), ("pg_stat_get_subscription", 's'), ("inet_client_addr", 's'), ("pg_tablespace_location", 's'), ("pg_config", 's'), ("pg_get_loaded_modules", 's'), ("pg_get_object_address", 's')] {
            let e = judge(&builtin(f, v), Scope::Generated, &[]).expect_err(f);
            assert!(matches!(e, GuardError::ForbiddenFunction { .. }), "{f}: {e:?}");
            // Not even the allow-list opens them.
            assert!(judge(&builtin(f, v), Scope::Generated, &[f.to_string()]).is_err(), "{f}");
        }
        // The statistics nl2sql reads of tables are not another session's.
        assert_eq!(judge(&builtin("pg_stat_get_tuples_inserted", 's'), Scope::Generated, &[]), Ok(()));
        // Nor are the session's own process ID and the functions reading a snapshot value.
        for f in ["pg_backend_pid", "pg_snapshot_xmin", "pg_visible_in_snapshot"] {
            assert_eq!(judge(&builtin(f, 's'), Scope::Generated, &[]), Ok(()), "{f}");
        }
    }

    #[test]
    fn a_user_function_named_like_a_builtin_is_judged_as_a_user_function() {
        let e = judge(&user("public", "upper", 'i', false), Scope::Generated, &[]).expect_err("untrusted");
        assert_eq!(e, GuardError::UntrustedFunction("public.upper".into()));
    }

    #[test]
    fn volatile_builtins_need_the_allow_list() {
        let f = builtin("txid_current_if_assigned", 'v');
        assert!(matches!(judge(&f, Scope::Generated, &[]), Err(GuardError::VolatileFunction(_))));
        assert_eq!(judge(&f, Scope::Generated, &["txid_current_if_assigned".into()]), Ok(()));
    }

    #[test]
    fn user_functions_need_the_allow_list_whatever_they_declare() {
        let f = user("app", "full_name", 'i', false);
        assert!(matches!(judge(&f, Scope::Generated, &[]), Err(GuardError::UntrustedFunction(_))));
        assert_eq!(judge(&f, Scope::Generated, &["app.full_name".into()]), Ok(()));
        assert_eq!(judge(&f, Scope::Generated, &["full_name".into()]), Ok(()));
        assert!(judge(&f, Scope::Generated, &["other.full_name".into()]).is_err());
        // Even a superuser's own function outside an extension is not trusted by default.
        assert!(judge(&user("app", "f", 'i', true), Scope::Generated, &[]).is_err());
    }

    #[test]
    fn extension_functions_by_volatility_unless_the_extension_is_denied() {
        assert_eq!(judge(&ext("pg_trgm", "similarity", 'i', true), Scope::Generated, &[]), Ok(()));
        assert!(matches!(judge(&ext("pg_trgm", "set_limit", 'v', true), Scope::Generated, &[]), Err(GuardError::VolatileFunction(_))));
        assert!(matches!(judge(&ext("dblink", "dblink_exec", 'v', true), Scope::Generated, &["dblink_exec".into()]), Err(GuardError::ForbiddenFunction { .. })));
        assert!(matches!(judge(&ext("tablefunc", "crosstab", 's', true), Scope::Generated, &[]), Err(GuardError::ForbiddenFunction { .. })));
        // Monitoring extensions read other sessions' statements and plans, stable or not; others
        // reach the network or run SQL in another session. The allow-list does not open them.
        for (e, f) in [("pg_stat_monitor", "pg_stat_monitor_internal"), ("pg_qualstats", "pg_qualstats"), ("pg_show_plans", "pg_show_plans"), ("pg_wait_sampling", "pg_wait_sampling_get_current"), ("http", "http_get"), ("pg_background", "pg_background_launch")] {
            assert!(matches!(judge(&ext(e, f, 's', true), Scope::Generated, &[f.into()]), Err(GuardError::ForbiddenFunction { .. })), "{e}");
        }
        // A function the owner of a trusted extension added to it keeps that owner.
        assert!(matches!(judge(&ext("hstore", "evil", 'i', false), Scope::Generated, &[]), Err(GuardError::UntrustedFunction(_))));
    }

    #[test]
    fn nl2sql_itself_only_for_its_own_reads() {
        let ask = FunctionFacts { schema: "public".into(), ..ext("nl2sql", "nl2sql", 'v', true) };
        assert!(judge(&ask, Scope::Generated, &["nl2sql".into()]).is_err());
        for name in ["_sample_columns", "_value_exists", "_inspecting"] {
            let helper = FunctionFacts { schema: "nl2sql".into(), ..ext("nl2sql", name, 's', true) };
            assert!(judge(&helper, Scope::Generated, &[]).is_err(), "{name}");
            assert_eq!(judge(&helper, Scope::Inspect, &[]), Ok(()), "{name}");
        }
        // The public entry points start a read of their own: never inside one.
        for name in ["column_stats", "_column_stats", "nl2sql_run"] {
            let api = FunctionFacts { schema: "nl2sql".into(), ..ext("nl2sql", name, 'v', true) };
            assert!(judge(&api, Scope::Inspect, &[]).is_err(), "{name}");
        }
        assert!(judge(&ask, Scope::Inspect, &[]).is_err());
    }

    #[test]
    fn elevated_runs_system_functions_only() {
        assert_eq!(judge(&builtin("set_config", 'v'), Scope::Elevated, &[]), Ok(()));
        assert_eq!(judge(&ext("nl2sql", "fold", 'i', true), Scope::Elevated, &[]), Ok(()));
        assert!(judge(&user("mallory", "check_it", 'i', false), Scope::Elevated, &["check_it".into()]).is_err());
        assert!(judge(&user("dba", "helper", 'i', true), Scope::Elevated, &[]).is_err());
    }

    #[test]
    fn the_planner_calls_no_denied_or_volatile_function_in_any_scope() {
        let all = [Scope::Generated, Scope::Inspect, Scope::Elevated, Scope::Catalog];
        for scope in all {
            // What an operator's function or a range's support function legitimately is.
            assert!(judge_planner_call(&builtin("int4ne", 'i'), scope, &[]).is_ok(), "{scope:?}");
            assert!(judge_planner_call(&builtin("tsrange_subdiff", 'i'), scope, &[]).is_ok(), "{scope:?}");
            // A table owner's operator over a denied built-in or a denied extension's function.
            for f in [builtin("pg_try_advisory_lock", 'v'), builtin("pg_terminate_backend", 'v'), ext("dblink", "dblink_exec", 'v', true)] {
                assert!(matches!(judge_planner_call(&f, scope, &[]), Err(GuardError::ForbiddenFunction { .. })), "{scope:?} {f:?}");
            }
        }
        // nl2sql's own queries trust every built-in, but not a volatile one called by the planner.
        for scope in [Scope::Elevated, Scope::Catalog] {
            assert!(judge(&builtin("random", 'v'), scope, &[]).is_ok());
            assert!(matches!(judge_planner_call(&builtin("random", 'v'), scope, &[]), Err(GuardError::VolatileFunction(_))));
        }
        // Elsewhere it is what judge says: an untrusted function stays untrusted, an allow-listed one is allowed.
        let hers = user("public", "her_eq", 'i', false);
        assert!(matches!(judge_planner_call(&hers, Scope::Generated, &[]), Err(GuardError::UntrustedFunction(_))));
        assert!(judge_planner_call(&hers, Scope::Generated, &["public.her_eq".into()]).is_ok());
        assert!(matches!(judge_planner_call(&hers, Scope::Elevated, &[]), Err(GuardError::UntrustedFunction(_))));
    }
}
