-- Sent by src/pg/owner.rs; its parameters ($1, $2, ...) are bound there.
-- The owner's search_path: PostgreSQL's catalog, then pgvector's schema (for its types and
-- operators: vector, <=>, <~>), then the temporary schema, which no operator or function
-- lookup reads. No other schema: where another role may create in one, an operator or type
-- of hers named like pgvector's would be found first (pg_trgm's schema is not on it: nl2sql
-- computes its trigram similarity itself and names nothing of pg_trgm).
-- A schema named "$user" would be read as the owner's own schema, quoted or not: the path is then
-- NULL, and nl2sql refuses to act as the owner (src/pg/owner.rs).
SELECT e.extowner,
       CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension v JOIN pg_catalog.pg_namespace n
                                ON n.oid OPERATOR(pg_catalog.=) v.extnamespace
                         WHERE v.extname OPERATOR(pg_catalog.=) 'vector' AND n.nspname OPERATOR(pg_catalog.=) '$user')
            THEN NULL ELSE
       'pg_catalog, ' OPERATOR(pg_catalog.||)
       COALESCE((SELECT pg_catalog.string_agg(DISTINCT pg_catalog.quote_ident(n.nspname), ', ') OPERATOR(pg_catalog.||) ', '
                            FROM pg_catalog.pg_extension v JOIN pg_catalog.pg_namespace n
                                 ON n.oid OPERATOR(pg_catalog.=) v.extnamespace
                            WHERE v.extname OPERATOR(pg_catalog.=) 'vector'), '')
       OPERATOR(pg_catalog.||) 'pg_temp' END
FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'nl2sql'
