-- Sent by src/pg/session.rs; its parameters ($1, $2, ...) are bound there.
SELECT EXISTS (SELECT FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) AS c(setting)
WHERE s.setdatabase OPERATOR(pg_catalog.=) ANY (ARRAY[0, (SELECT d.oid FROM pg_catalog.pg_database d
                                      WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())]::pg_catalog.oid[])
  AND s.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0, $1, $2]::pg_catalog.oid[])
  AND pg_catalog.lower(c.setting) OPERATOR(pg_catalog.=) ANY
      ('{nl2sql.privacy=on,nl2sql.privacy=1,nl2sql.privacy=t,nl2sql.privacy=tr,nl2sql.privacy=tru,nl2sql.privacy=true,nl2sql.privacy=y,nl2sql.privacy=ye,nl2sql.privacy=yes}'::pg_catalog.text[]))
