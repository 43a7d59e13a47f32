-- The examples library: question/SQL pairs shown to the model as few-shot, found by the
-- similarity of their masked questions (names and values replaced by placeholders).
-- Examples go into other roles' prompts, so only curators (members of nl2sql_curator, and
-- superusers) add, generate, enable and remove them, through nl2sql's functions; every role
-- reads, through nl2sql.examples, only the examples about relations it may read whole
-- (sql/may_read.sql: an example's SQL and thought may name any column).

-- The right to curate the library; GRANT nl2sql_curator TO a role.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_curator') THEN
        CREATE ROLE nl2sql_curator NOLOGIN;
    ELSIF EXISTS (SELECT FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) m.roleid
                  WHERE r.rolname OPERATOR(pg_catalog.=) 'nl2sql_curator')
          OR EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'nl2sql_curator' AND rolcanlogin) THEN
        -- roles belong to the cluster: one made for another database, or by someone else
        RAISE WARNING 'role nl2sql_curator already exists and can log in or has members: they write the examples every role''s prompts are shown'
            USING HINT = 'Check it with \du nl2sql_curator.';
    END IF;
END
$$;

CREATE TABLE nl2sql.example_store (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    question text NOT NULL,
    -- the question with names and values as <name> and <value>, what retrieval compares
    question_masked text NOT NULL,
    sql text NOT NULL,
    -- the chain of thought written from the SQL by the model (NULL until written)
    thought text,
    hint text,
    source text NOT NULL CHECK (source IN ('builtin', 'user', 'synthetic', 'feedback')),
    -- whether the SQL ran in the sandbox when it was added (built-in examples use tables of their own)
    executed boolean NOT NULL,
    enabled boolean NOT NULL DEFAULT true,
    -- the relations the SQL needs SELECT on, from PostgreSQL's parse of it when it was added
    -- (regclass: pg_dump writes names, so a restore points at the same tables again)
    relations regclass[] NOT NULL DEFAULT '{}',
    -- the relations whose rows the model was shown when it wrote the chain of thought, a
    -- synthetic pair or an offered call's query: such text may quote rows, and is shown only
    -- while those rows are the same for every reader (no row-level security, not a view)
    sampled regclass[] NOT NULL DEFAULT '{}',
    added_by oid NOT NULL,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- the built-in embedder's vector of question_masked
    embedding vector(256) NOT NULL,
    -- the in-database sentence model's vector of question_masked (nl2sql.column_embedder =
    -- minilm; NULL until nl2sql.refresh_value_indexes() or the insert computes it)
    meaning vector(384)
);
CREATE INDEX example_store_embedding ON nl2sql.example_store USING hnsw (embedding vector_cosine_ops);
-- A dropped relation's examples, found by the sql_drop trigger (values.sql).
CREATE INDEX example_store_relations ON nl2sql.example_store USING gin (relations);
CREATE INDEX example_store_sampled ON nl2sql.example_store USING gin (sampled);
-- pg_dump keeps what users added, and where the ids are; the built-in examples come with the
-- extension.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example_store', 'WHERE source <> ''builtin''');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example_store_id_seq', '');

-- Every role sees the examples about relations it may read whole now (GRANT and REVOKE take
-- effect at once; a dropped relation takes its examples with it). Text the model wrote from
-- rows of a table that has since got row-level security (or become a view) may quote rows
-- some readers may not see: the chain of thought is hidden then (nl2sql.write_example_thoughts()
-- writes it again, without those samples), and a synthetic pair or an offered call's query
-- (source feedback, written by the model from the asker's rows) altogether. src/pg/examples/
-- (VISIBLE_TO) holds the same condition for the curators' writes.
CREATE VIEW nl2sql.examples WITH (security_barrier) AS
SELECT s.id, s.question, s.question_masked, s.sql, CASE WHEN x.exposed THEN NULL ELSE s.thought END AS thought,
       s.hint, s.source, s.executed, s.enabled, s.relations, s.added_by::pg_catalog.regrole AS added_by,
       s.added_at, s.embedding, s.meaning
FROM nl2sql.example_store s
CROSS JOIN LATERAL (SELECT EXISTS (SELECT FROM pg_catalog.pg_class c
                                   WHERE c.oid OPERATOR(pg_catalog.=) ANY (s.sampled::pg_catalog.oid[])
                                     AND (c.relrowsecurity OR c.relkind OPERATOR(pg_catalog.<>) ALL ('{r,p,m}'::pg_catalog."char"[])))
                    AS exposed) x
WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                  WHERE NOT nl2sql._may_read_all((SELECT nl2sql._me()), r.oid))
  AND NOT (x.exposed AND s.source OPERATOR(pg_catalog.=) ANY ('{synthetic,feedback}'::pg_catalog.text[]));
GRANT SELECT ON nl2sql.examples TO PUBLIC;
COMMENT ON VIEW nl2sql.examples IS
    'the examples library: the examples whose SQL reads only what the current role may read';
