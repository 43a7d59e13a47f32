-- Sent by src/pg/secrets.rs; its parameters ($1, $2, ...) are bound there.
SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
           WHERE c OPERATOR(pg_catalog.~~) E'nl2sql.%api\\_key=%')::int4,
(SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc p, pg_catalog.unnest(p.proconfig) c
           WHERE c OPERATOR(pg_catalog.~~) E'nl2sql.%api\\_key=%')::int4
