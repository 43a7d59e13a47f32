-- Sent by src/pg/secrets.rs; its parameters ($1, $2, ...) are bound there.
SELECT EXISTS (
SELECT 1 FROM pg_catalog.pg_parameter_acl p, pg_catalog.aclexplode(p.paracl) a
LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.grantee
WHERE p.parname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND a.privilege_type OPERATOR(pg_catalog.=) 'SET'
  AND r.rolsuper IS NOT TRUE)
