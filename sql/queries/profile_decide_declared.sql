-- Sent by src/pg/relationships/decide.rs; its parameters ($1, $2, ...) are bound there.
SELECT EXISTS (SELECT FROM pg_catalog.pg_constraint k
WHERE k.contype OPERATOR(pg_catalog.=) 'f'
  AND k.conrelid OPERATOR(pg_catalog.=) $1 AND k.confrelid OPERATOR(pg_catalog.=) $3
  AND ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(k.conkey) WITH ORDINALITY u(n, o)
            JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) k.conrelid AND a.attnum OPERATOR(pg_catalog.=) u.n
            ORDER BY u.o) OPERATOR(pg_catalog.=) $2
  AND ARRAY(SELECT a.attname::pg_catalog.text FROM pg_catalog.unnest(k.confkey) WITH ORDINALITY u(n, o)
            JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) k.confrelid AND a.attnum OPERATOR(pg_catalog.=) u.n
            ORDER BY u.o) OPERATOR(pg_catalog.=) $4)
