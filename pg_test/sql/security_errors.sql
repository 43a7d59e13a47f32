-- Hostile model output, class 7: error texts go back to the model in correction prompts. A
-- candidate that fails with an error quoting a stored value (a cast error) is sent back with
-- its SQLSTATE and PostgreSQL's wording, the value replaced by "…"; the caller still sees the
-- real error. What the endpoint received is read from the scripted model's request log.
CREATE TABLE vault (secret text);
INSERT INTO vault VALUES ('zz-secret-7731');
INSERT INTO vault SELECT 'aa-' || g FROM generate_series(1, 50) g;
SET nl2sql.mode = zero_shot;
SET nl2sql.sample_rows = 0;
SELECT * FROM nl2sql_run('[leaky-cast] how many secrets?');
SELECT c->>'error' AS first_error FROM jsonb_array_elements(nl2sql.last_trace() -> 'candidates') c LIMIT 1;
SELECT * FROM nl2sql_run('[leaky-regclass] how many secrets?');
-- Every request the endpoint received: the stored value never, the SQLSTATEs and the
-- placeholder in the correction prompts.
\! python3 tests/mock_sent.py zz-secret-7731 22P02 42P01 …
RESET nl2sql.mode;
RESET nl2sql.sample_rows;
DROP TABLE vault;
