-- The tables, views and columns the current role may SELECT, with keys and comments, as one json document (json, not jsonb: built as text, several times faster on thousands of columns).
-- Run through SPI with the caller's privileges and search_path (which decides how names are
-- qualified); every operator is pg_catalog's, whatever that path holds. Nothing reads table data.
-- Besides the declared keys: relationships a DBA confirmed, and ($1) those and the keys
-- profiling inferred, from the views that show only what the caller may read (relationships.sql).
WITH trusted AS (
    -- the owners the caller trusts (sql/may_read.sql)
    SELECT ro.oid AS role FROM pg_catalog.pg_roles ro WHERE nl2sql._trusts((SELECT nl2sql._me()), ro.oid)
), listed AS (
    SELECT c.oid, n.nspname, c.relname, c.relkind, c.reltuples,
           CASE WHEN pg_catalog.pg_table_is_visible(c.oid) THEN pg_catalog.quote_ident(c.relname)
                ELSE pg_catalog.concat(pg_catalog.quote_ident(n.nspname), '.', pg_catalog.quote_ident(c.relname)) END AS ident,
           pg_catalog.pg_table_is_visible(c.oid) AS visible,
           -- a comment is someone else's text of any length: its first 1,000 characters (read as
           -- a slice; the prompt shows at most 120 of them); none of a stranger's table (below)
           pg_catalog.substr(td.description, 1, 1000) AS comment,
           -- SELECT on the whole table: no column needs checking one by one (the fast path of
           -- nl2sql._may_read_column(), for relations _may_read() let through)
           pg_catalog.has_table_privilege(c.oid, 'SELECT') AS all_columns,
           c.relowner,
           -- an owner the caller trusts (above). A bare name is read as a table off the search
           -- path only then (core/src/align/names.rs)
           EXISTS (SELECT FROM trusted tr WHERE tr.role OPERATOR(pg_catalog.=) c.relowner) AS owner_trusted,
           pg_catalog.pg_stat_get_tuples_inserted(c.oid) OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_tuples_updated(c.oid)
             OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_tuples_deleted(c.oid) AS changes
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
    LEFT JOIN pg_catalog.pg_description td
           ON td.objoid OPERATOR(pg_catalog.=) c.oid AND td.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND td.objsubid OPERATOR(pg_catalog.=) 0
    WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,v,m,f}'::pg_catalog."char"[])
      AND NOT c.relispartition
      AND NOT n.nspname OPERATOR(pg_catalog.=) ANY ('{pg_catalog,information_schema,nl2sql}'::pg_catalog.name[])
      AND n.nspname::pg_catalog.text OPERATOR(pg_catalog.!~) '^pg_(toast|temp_)'::pg_catalog.text
      -- what the role may read (sql/may_read.sql)
      AND nl2sql._may_read((SELECT nl2sql._me()), c.oid)
      -- objects that belong to an extension (pgvector's, ours) are not user data
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                      WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                        AND d.objid OPERATOR(pg_catalog.=) c.oid AND d.deptype OPERATOR(pg_catalog.=) 'e')
), rels AS (
    -- a stranger's table: off the search path, of an owner the caller does not trust. Its
    -- comments and its enum labels are her words, not the database's: not shown, not searched
    -- (the prompt shows her tables last, by name and columns; src/pg/catalog.rs samples none of
    -- them; core's Table::is_strangers links none of them)
    SELECT l.oid, l.nspname, l.relname, l.relkind, l.reltuples, l.ident, l.all_columns, l.relowner,
           l.owner_trusted, l.changes, NOT (l.visible OR l.owner_trusted) AS stranger,
           CASE WHEN l.visible OR l.owner_trusted THEN l.comment END AS comment
    FROM listed l
), cols AS (
    SELECT a.attrelid, a.attnum, a.attname,
           pg_catalog.quote_ident(a.attname) AS ident,
           -- the name of a type off the search path whose owner the caller does not trust is
           -- her words: a domain's base type's name where that one is trusted, else
           -- information_schema's word for it
           CASE WHEN tt.trusted THEN pg_catalog.format_type(a.atttypid, a.atttypmod)
                WHEN t.typtype OPERATOR(pg_catalog.=) 'd' AND bt.trusted THEN pg_catalog.format_type(t.typbasetype, t.typtypmod)
                ELSE 'USER-DEFINED' END AS data_type,
           t.typcategory AS category,
           -- a NOT NULL constraint not yet validated (PostgreSQL 18) still lets old rows hold NULL
           a.attnotnull AND nv.conrelid IS NULL AS not_null,
           CASE WHEN NOT r.stranger THEN pg_catalog.substr(cd.description, 1, 1000) END AS comment,
           -- a stranger's enum labels are her words too (rels), and so are those of an enum type
           -- off the search path whose owner the caller does not trust, on whoever's table
           CASE WHEN t.typtype OPERATOR(pg_catalog.=) 'e' AND NOT r.stranger AND tt.trusted THEN
                (SELECT pg_catalog.array_agg(e.enumlabel ORDER BY e.enumsortorder)
                 FROM pg_catalog.pg_enum e WHERE e.enumtypid OPERATOR(pg_catalog.=) t.oid) END AS enum_values
    FROM pg_catalog.pg_attribute a
    JOIN rels r ON r.oid OPERATOR(pg_catalog.=) a.attrelid
    JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid
    CROSS JOIN LATERAL (SELECT pg_catalog.pg_type_is_visible(t.oid)
                               OR EXISTS (SELECT FROM trusted tr WHERE tr.role OPERATOR(pg_catalog.=) t.typowner) AS trusted) tt
    LEFT JOIN LATERAL (SELECT pg_catalog.pg_type_is_visible(b.oid)
                              OR EXISTS (SELECT FROM trusted tr WHERE tr.role OPERATOR(pg_catalog.=) b.typowner) AS trusted
                       FROM pg_catalog.pg_type b WHERE b.oid OPERATOR(pg_catalog.=) t.typbasetype) bt ON true
    LEFT JOIN pg_catalog.pg_description cd
           ON cd.objoid OPERATOR(pg_catalog.=) a.attrelid AND cd.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND cd.objsubid OPERATOR(pg_catalog.=) a.attnum
    LEFT JOIN (SELECT DISTINCT nn.conrelid, nn.conkey[1] AS attnum FROM pg_catalog.pg_constraint nn
               WHERE nn.contype OPERATOR(pg_catalog.=) 'n' AND NOT nn.convalidated) nv
           ON nv.conrelid OPERATOR(pg_catalog.=) a.attrelid AND nv.attnum OPERATOR(pg_catalog.=) a.attnum
    WHERE a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT a.attisdropped
      AND (r.all_columns OR nl2sql._may_read_column((SELECT nl2sql._me()), a.attrelid, a.attnum))
), keys AS (
    SELECT con.conrelid, con.contype, con.conkey, con.confrelid, con.confkey, con.conname,
           -- a foreign key every row the role reads meets exactly one row of: validated, checked
           -- at once (never deferred), on tables whose rows are theirs alone (a table with
           -- inheritance children reads theirs too, which the key does not cover) and, for the
           -- table it points to, no row security hiding the row a key finds
           con.convalidated AND NOT con.condeferrable
             AND NOT EXISTS (SELECT FROM pg_catalog.pg_class x
                             WHERE x.oid OPERATOR(pg_catalog.=) ANY (ARRAY[con.conrelid, con.confrelid])
                               AND x.relkind OPERATOR(pg_catalog.=) 'r' AND x.relhassubclass)
             AND NOT EXISTS (SELECT FROM pg_catalog.pg_class x
                             WHERE x.oid OPERATOR(pg_catalog.=) con.confrelid AND x.relrowsecurity)
             -- nor a key whose checks were turned off (ALTER TABLE ... DISABLE TRIGGER ALL)
             AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger tg
                             WHERE tg.tgconstraint OPERATOR(pg_catalog.=) con.oid
                               AND tg.tgenabled OPERATOR(pg_catalog.=) 'D') AS holds
    FROM pg_catalog.pg_constraint con
    JOIN rels r ON r.oid OPERATOR(pg_catalog.=) con.conrelid
    WHERE con.contype OPERATOR(pg_catalog.=) ANY ('{p,f}'::pg_catalog."char"[])
), table_columns AS (
    -- one pass over the columns, grouped by table (no per-table rescans of cols)
    SELECT c.attrelid,
           pg_catalog.json_agg(pg_catalog.json_build_object(
               'name', c.attname, 'ident', c.ident, 'data_type', c.data_type,
               'category', c.category, 'not_null', c.not_null, 'comment', c.comment,
               'enum_values', COALESCE(pg_catalog.to_json(c.enum_values), '[]'::json))
             ORDER BY c.attnum) AS columns
    FROM cols c
    GROUP BY c.attrelid
), primary_keys AS (
    SELECT p.conrelid, pg_catalog.json_agg(a.attname ORDER BY k.ord) AS columns
    FROM keys p
    CROSS JOIN LATERAL pg_catalog.unnest(p.conkey) WITH ORDINALITY AS k(attnum, ord)
    JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) p.conrelid AND a.attnum OPERATOR(pg_catalog.=) k.attnum
    WHERE p.contype OPERATOR(pg_catalog.=) 'p'
    GROUP BY p.conrelid
    -- a key is shown only when the role may read every column of it (the columns above)
    HAVING pg_catalog.bool_and(EXISTS (SELECT FROM cols c WHERE c.attrelid OPERATOR(pg_catalog.=) p.conrelid
                                                         AND c.attnum OPERATOR(pg_catalog.=) k.attnum))
), inferred_keys AS (
    -- one key a table: the first profiling kept (it keeps at most one)
    SELECT DISTINCT ON (k.relation::pg_catalog.oid) k.relation::pg_catalog.oid AS relid, pg_catalog.to_json(k.columns) AS columns
    FROM nl2sql.candidate_keys k
    WHERE $1 AND k.source OPERATOR(pg_catalog.=) 'inferred'
    ORDER BY k.relation::pg_catalog.oid, k.columns
), stored_links AS (
    SELECT s.from_relation::pg_catalog.oid AS conrelid, s.to_relation::pg_catalog.oid AS confrelid,
           ARRAY(SELECT pg_catalog.quote_ident(c) FROM pg_catalog.unnest(s.from_columns) WITH ORDINALITY u(c, o) ORDER BY u.o) AS cols,
           ARRAY(SELECT pg_catalog.quote_ident(c) FROM pg_catalog.unnest(s.to_columns) WITH ORDINALITY u(c, o) ORDER BY u.o) AS ref_cols,
           s.source OPERATOR(pg_catalog.=) 'inferred' AS inferred
    FROM nl2sql.relationships s
    WHERE s.source OPERATOR(pg_catalog.=) 'confirmed' OR ($1 AND s.source OPERATOR(pg_catalog.=) 'inferred')
)
SELECT pg_catalog.json_build_object(
    'tables', COALESCE((
        SELECT pg_catalog.json_agg(pg_catalog.json_build_object(
            'oid', r.oid::int8,
            'schema', r.nspname,
            'name', r.relname,
            'ident', r.ident,
            'kind', r.relkind,
            'comment', r.comment,
            'row_estimate', CASE WHEN r.reltuples OPERATOR(pg_catalog.>=) 0::pg_catalog.float4 THEN r.reltuples END,
            'changes', r.changes,
            'columns', tc.columns,
            'primary_key', COALESCE(pk.columns, ik.columns, '[]'::json),
            'key_inferred', pk.columns IS NULL AND ik.columns IS NOT NULL,
            'owner_trusted', r.owner_trusted)
          ORDER BY r.stranger, r.nspname, r.relname)
        FROM rels r
        JOIN table_columns tc ON tc.attrelid OPERATOR(pg_catalog.=) r.oid
        LEFT JOIN primary_keys pk ON pk.conrelid OPERATOR(pg_catalog.=) r.oid
        LEFT JOIN inferred_keys ik ON ik.relid OPERATOR(pg_catalog.=) r.oid), '[]'::json),
    'foreign_keys', COALESCE((
        SELECT pg_catalog.json_agg(pg_catalog.json_build_object(
            'table', src.ident, 'columns', fk.cols, 'ref_table', dst.ident, 'ref_columns', fk.ref_cols, 'inferred', fk.inferred,
            'enforced', fk.enforced)
          -- stored relationships have no constraint name: their columns break the tie
          ORDER BY fk.inferred, src.ident, fk.conname, fk.cols::pg_catalog.text, dst.ident, fk.ref_cols::pg_catalog.text)
        FROM (
            SELECT f.conrelid, f.confrelid, f.conname,
                   pg_catalog.array_agg(sc.ident ORDER BY k.ord) AS cols,
                   pg_catalog.array_agg(dc.ident ORDER BY k.ord) AS ref_cols,
                   pg_catalog.count(sc.ident) OPERATOR(pg_catalog.=) pg_catalog.count(*) AND pg_catalog.count(dc.ident) OPERATOR(pg_catalog.=) pg_catalog.count(*) AS all_visible,
                   false AS inferred, f.holds AS enforced
            FROM keys f
            CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(f.conkey), pg_catalog.unnest(f.confkey)) WITH ORDINALITY AS k(src_att, dst_att, ord)
            LEFT JOIN cols sc ON sc.attrelid OPERATOR(pg_catalog.=) f.conrelid AND sc.attnum OPERATOR(pg_catalog.=) k.src_att
            LEFT JOIN cols dc ON dc.attrelid OPERATOR(pg_catalog.=) f.confrelid AND dc.attnum OPERATOR(pg_catalog.=) k.dst_att
            WHERE f.contype OPERATOR(pg_catalog.=) 'f'
            GROUP BY f.conrelid, f.confrelid, f.conname, f.holds
            UNION ALL
            -- relationships profiling or a DBA stored: the view showed only columns the caller may read
            SELECT l.conrelid, l.confrelid, NULL, l.cols, l.ref_cols, true, l.inferred, false FROM stored_links l
        ) fk
        JOIN rels src ON src.oid OPERATOR(pg_catalog.=) fk.conrelid
        JOIN rels dst ON dst.oid OPERATOR(pg_catalog.=) fk.confrelid
        WHERE fk.all_visible), '[]'::json)
)::text
