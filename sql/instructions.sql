-- Instructions: the definitions and rules an analyst knows and the schema does not say ("ADV is
-- the average daily volume of a ticker", "revenue excludes refunds"), stored once per database
-- and shown to the model beside the questions they concern. Like examples they go into other
-- roles' prompts, so only curators (members of nl2sql_curator, and superusers) add, enable and
-- remove them, through nl2sql's functions; every role reads, through nl2sql.instructions, only
-- the instructions about tables it may read whole (sql/may_read.sql: an instruction may name
-- any column). COMMENT ON stays the place for what one column
-- means; instructions are for what spans tables.

CREATE TABLE nl2sql.instruction_store (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instruction text NOT NULL,
    -- the SQL fragment the instruction stands for, shown with it (never run)
    sql text,
    -- the relations it concerns: a role is shown it only while it may read all of each
    -- (regclass: pg_dump writes names, so a restore points at the same tables again)
    relations regclass[] NOT NULL DEFAULT '{}',
    enabled boolean NOT NULL DEFAULT true,
    added_by oid NOT NULL,
    added_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- the built-in embedder's vector of the instruction and its fragment
    embedding vector(256) NOT NULL,
    -- the in-database sentence model's (nl2sql.column_embedder = minilm; NULL until
    -- nl2sql.refresh_value_indexes() or the insert computes it)
    meaning vector(384)
);
-- A dropped relation's instructions, found by the sql_drop trigger (values.sql).
CREATE INDEX instruction_store_relations ON nl2sql.instruction_store USING gin (relations);
-- pg_dump keeps them: they are the curators' configuration, like a COMMENT.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.instruction_store', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.instruction_store_id_seq', '');

-- Every role sees the instructions about relations it may read whole now (GRANT and REVOKE
-- take effect at once; a dropped relation takes its instructions with it). One about no relation
-- concerns the whole database and is shown to every role. src/pg/instructions.rs (READABLE_BY)
-- holds the same condition for the curators' writes.
CREATE VIEW nl2sql.instructions WITH (security_barrier) AS
SELECT s.id, s.instruction, s.sql, s.relations, s.enabled, s.added_by::pg_catalog.regrole AS added_by, s.added_at,
       s.embedding, s.meaning
FROM nl2sql.instruction_store s
WHERE NOT EXISTS (SELECT FROM pg_catalog.unnest(s.relations) AS r(oid)
                  WHERE NOT nl2sql._may_read_all((SELECT nl2sql._me()), r.oid));
GRANT SELECT ON nl2sql.instructions TO PUBLIC;
COMMENT ON VIEW nl2sql.instructions IS
    'curators'' instructions (definitions, business rules): those about relations the current role may read';
