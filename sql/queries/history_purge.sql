-- Sent by src/pg/history.rs; its parameters ($1, $2, ...) are bound there.
WITH gone AS (DELETE FROM nl2sql.history
              WHERE asked_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-)
                    coalesce($1::pg_catalog.interval, pg_catalog.make_interval(mins => $2::pg_catalog.int4)))
              RETURNING 1)
SELECT pg_catalog.count(*) FROM gone
