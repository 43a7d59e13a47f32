-- The text a column is embedded from: "Y X (T): C (table: D)", table and column names, type and
-- comments, without words every description would share (they dilute a sentence model's match).
-- The name of a type whose owner the table's owner does not trust (sql/may_read.sql) is that
-- owner's words, not the table's: a domain's base type's name where that one is trusted, else
-- information_schema's word for it (as the schema prompt shows it).
CREATE FUNCTION nl2sql._column_description(rel oid, att int2)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- comments are cut (a sentence model reads 128 tokens; a huge one would be copied into
    -- every column's row); substr reads only the slice it keeps of a stored comment
    SELECT left(format('%s %s (%s)%s',
                       c.relname, a.attname,
                       CASE WHEN nl2sql._trusts(c.relowner, t.typowner) THEN format_type(a.atttypid, a.atttypmod)
                            WHEN t.typtype = 'd' AND nl2sql._trusts(c.relowner, b.typowner) THEN format_type(t.typbasetype, t.typtypmod)
                            ELSE 'USER-DEFINED' END,
                       coalesce(': ' || substr(col_description(c.oid, a.attnum), 1, 1000), '')
                       || coalesce(' (table: ' || substr(obj_description(c.oid, 'pg_class'), 1, 1000) || ')', '')),
                2000)
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
    JOIN pg_type t ON t.oid = a.atttypid
    LEFT JOIN pg_type b ON b.oid = t.typbasetype
    WHERE c.oid = rel AND a.attnum = att
$$;
