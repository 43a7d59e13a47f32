-- Sent by src/pg/values/search.rs; its parameters ($1, $2, ...) are bound there.
SELECT x.relid, x.attnum FROM pg_catalog.unnest($3::text[]) AS p(sig)
CROSS JOIN LATERAL (SELECT relid, attnum FROM nl2sql.column_embeddings y
                    WHERE nl2sql._may_read_column($1, y.relid, y.attnum)
                    ORDER BY y.sig <~> p.sig::bit(256) LIMIT 50) x
