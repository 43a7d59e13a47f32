-- The instructions' SQL surface: typed wrappers around the underscored Rust functions. No SET
-- search_path on add_instruction: the tables its text names are found as the caller's
-- search_path finds them.

CREATE FUNCTION nl2sql.add_instruction(instruction text, tables regclass[] DEFAULT NULL, sql text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$ SELECT nl2sql._add_instruction($1, $2::pg_catalog.oid[], $3) $$;
COMMENT ON FUNCTION nl2sql.add_instruction(text, regclass[], text) IS
    'store a definition or rule for the questions about the given tables (by default the tables its text names); its id';
