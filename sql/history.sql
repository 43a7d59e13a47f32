-- The history: one row per call of nl2sql(), nl2sql_run() and nl2sql_explain(). Every role
-- reads its own rows (row-level security); members of nl2sql_admin and superusers read all.
-- Rows are written only by nl2sql's functions, as the extension owner, with parameters only.

-- The right to read every role's history and to purge it; GRANT nl2sql_admin TO a role.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_admin') THEN
        CREATE ROLE nl2sql_admin NOLOGIN;
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid
                  WHERE r.rolname OPERATOR(pg_catalog.=) 'nl2sql_admin')
          OR EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_admin' AND rolcanlogin) THEN
        RAISE WARNING 'role nl2sql_admin already exists and can log in or has members: they read every role''s nl2sql history'
            USING HINT = 'Check it with \du nl2sql_admin.';
    END IF;
END
$$;

CREATE TABLE nl2sql.history (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- the role that asked (the current user of the call), and its name then: a row is its role's
    -- while both match (a restore, which gives roles new OIDs, or a rename leaves rows to the
    -- administrators; a new role never inherits a dropped one's rows)
    asked_by oid NOT NULL,
    role_name name NOT NULL,
    database name NOT NULL DEFAULT pg_catalog.current_database(),
    asked_at timestamptz NOT NULL,
    question text NOT NULL,
    hint text,
    -- the call this question followed up (nl2sql(..., follows => id))
    follows bigint,
    mode text NOT NULL,
    -- the chosen query (NULL when the call failed)
    sql text,
    confidence float8,
    -- candidates sampled, and the vote's groups: [{"votes": 3, "rows": 1, "cost": 12.5}, ...]
    candidates integer NOT NULL DEFAULT 0,
    vote jsonb,
    prompt_tokens integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    latency_ms float8 NOT NULL,
    -- the error the call raised, when it failed
    sqlstate text,
    error text,
    -- nl2sql.feedback(): whether the answer was right, the corrected query, the example made of it
    feedback boolean,
    corrected_sql text,
    feedback_at timestamptz,
    example_id bigint,
    -- the relations whose rows (samples, stored values, query results) the call's prompts
    -- showed the model: its query may quote them, so nl2sql.feedback() offers it as an
    -- example only while those rows are the same for every reader
    shown regclass[] NOT NULL DEFAULT '{}'
);
CREATE INDEX history_asked_at ON nl2sql.history (asked_at);
CREATE INDEX history_asked_by ON nl2sql.history (asked_by, id);
ALTER TABLE nl2sql.history ENABLE ROW LEVEL SECURITY;
CREATE POLICY history_own_rows ON nl2sql.history FOR SELECT
    USING ((asked_by OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
            AND role_name OPERATOR(pg_catalog.=) CURRENT_USER)
           OR (pg_catalog.to_regrole('nl2sql_admin') IS NOT NULL
               AND pg_catalog.pg_has_role(CURRENT_USER, 'nl2sql_admin', 'MEMBER')));
GRANT SELECT ON nl2sql.history TO PUBLIC;
COMMENT ON TABLE nl2sql.history IS
    'one row per nl2sql call: each role sees its own, nl2sql_admin all; purged by nl2sql.purge_history()';
-- pg_dump keeps the history and where its ids are.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.history', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.history_id_seq', '');
