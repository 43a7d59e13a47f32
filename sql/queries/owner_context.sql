-- Sent by src/pg/owner.rs; its parameters ($1, $2, ...) are bound there.
SELECT e.extowner,
       'pg_catalog, ' OPERATOR(pg_catalog.||)
       COALESCE((SELECT pg_catalog.string_agg(DISTINCT pg_catalog.quote_ident(n.nspname), ', ') OPERATOR(pg_catalog.||) ', '
                            FROM pg_catalog.pg_extension v JOIN pg_catalog.pg_namespace n
                                 ON n.oid OPERATOR(pg_catalog.=) v.extnamespace
                            WHERE v.extname OPERATOR(pg_catalog.=) ANY ('{vector,pg_trgm}'::pg_catalog.name[])), '')
       OPERATOR(pg_catalog.||) 'pg_temp'
FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'nl2sql'
