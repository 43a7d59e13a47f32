-- Sent by src/pg/values/search.rs; its parameters ($1, $2, ...) are bound there.
SELECT x.relid, x.attnum FROM pg_catalog.unnest($3::text[]) AS p(sig)
CROSS JOIN LATERAL (SELECT relid, attnum FROM nl2sql.column_embeddings y
                    WHERE nl2sql._may_read_column($1, y.relid, y.attnum)
                      -- a stranger's tables (search.rs: leave_out), before the limit
                      AND y.relid <> ALL ($5::oid[])
                    ORDER BY y.sig <~> p.sig::bit(256) LIMIT 50) x
