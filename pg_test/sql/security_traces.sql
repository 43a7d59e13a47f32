-- A low-privilege role behind a pooler, class 5: traces belong to the role that made them.
-- SET ROLE, RESET ROLE, SET SESSION AUTHORIZATION and DISCARD ALL forget them, and a role
-- never reads a trace another role made in the same session.
CREATE TABLE sec_payroll (name text, salary int);
INSERT INTO sec_payroll VALUES ('Ann', 5000), ('Bob', 7000);
CREATE ROLE pooled;
GRANT SELECT ON singer TO pooled;
SET nl2sql.mode = zero_shot;

SELECT nl2sql('[payroll] how many salaries?');
SELECT position('sec_payroll' IN nl2sql.last_trace()::text) > 0 AS own_trace_shows_payroll;
SET ROLE pooled;
SELECT nl2sql.last_trace() IS NULL AS other_role_sees_nothing;
RESET ROLE;
SELECT nl2sql.last_trace() IS NULL AS forgotten_after_set_role;

SELECT nl2sql('[payroll] how many salaries?');
SET SESSION AUTHORIZATION pooled;
SELECT nl2sql.last_trace() IS NULL AS forgotten_after_session_authorization;
RESET SESSION AUTHORIZATION;

SELECT nl2sql('[payroll] how many salaries?');
DISCARD ALL;
SELECT nl2sql.last_trace() IS NULL AS forgotten_after_discard_all;
SET nl2sql.mode = zero_shot;

-- Clients of a pooler that share one role differ in the settings their policies read.
SET app.tenant = 'north';
SELECT nl2sql('[payroll] how many salaries?');
SET app.tenant = 'south';
SELECT nl2sql.last_trace() IS NULL AS hidden_from_another_tenant;
RESET app.tenant;

-- set_config('role', ...) is no utility statement; the trace still knows whose it is.
SELECT nl2sql('[payroll] how many salaries?');
SELECT set_config('role', 'pooled', false) AS role;
SELECT nl2sql.last_trace() IS NULL AS hidden_after_set_config;
RESET ROLE;

BEGIN;
SELECT nl2sql('[payroll] how many salaries?');
SET LOCAL ROLE pooled;
SELECT nl2sql.last_trace() IS NULL AS forgotten_after_set_local_role;
COMMIT;

-- nl2sql_explain() shows only the call it makes, as the role that makes it.
SET ROLE pooled;
SELECT nl2sql_explain('How many singers do we have?') ->> 'sql' AS explained;
SELECT position('sec_payroll' IN nl2sql.last_trace()::text) = 0 AS own_trace_only;
RESET ROLE;
SELECT nl2sql.last_trace() IS NULL AS forgotten_again;

DROP OWNED BY pooled;
DROP ROLE pooled;
DROP TABLE sec_payroll;
RESET nl2sql.mode;
