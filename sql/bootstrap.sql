-- Internal objects live in schema nl2sql; the user-facing functions go to the extension's schema.
CREATE SCHEMA nl2sql;
COMMENT ON SCHEMA nl2sql IS 'nl2sql internals: introspection and inspection functions';
-- Roles need USAGE so nl2sql() can call its helpers with the caller's privileges.
GRANT USAGE ON SCHEMA nl2sql TO PUBLIC;
