-- What PL/pgSQL messages show of text another role chose (a table's or a column's name, an
-- error message that quotes one): on one line, each control character, line or paragraph
-- separator and bidirectional control written \u{XXXX}, as core/src/render.rs writes the
-- messages the Rust code sends.

CREATE FUNCTION nl2sql._one_line(t text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(pg_catalog.string_agg(
               CASE WHEN s.c OPERATOR(pg_catalog.~) E'[\\x01-\\x08\\x0a-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069]'
                    THEN pg_catalog.format(E'\\u{%s}', pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(s.c))), 4, '0'))
                    ELSE s.c END, '' ORDER BY s.o), '')
    FROM pg_catalog.regexp_split_to_table(t, '') WITH ORDINALITY AS s(c, o)
$$;
