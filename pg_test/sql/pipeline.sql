-- The full pipeline (nl2sql.mode = full, the default): extraction, n candidates with a
-- structured chain of thought, alignments, execution, corrections by error type, and a vote.
-- The scripted model answers each question with crafted candidates.
LOAD 'nl2sql';
SHOW nl2sql.mode;
SHOW nl2sql.candidates;
SHOW nl2sql.agreement;
SHOW nl2sql.extraction_min_tokens;

-- A schema this small goes whole to the candidates: no extraction round trip (the trace says
-- why), and the candidates' prompt starts as every other prompt on this database does. The
-- first generator's answer runs and returns rows, so it stands alone (nl2sql.alone_confidence):
-- one round trip.
SELECT e->'extraction' AS extraction, e->>'extraction_skipped' AS skipped, e->'totals'->>'round_trips' AS round_trips
FROM nl2sql_explain('How many concerts took place in 2014?') AS e;

-- Above nl2sql.extraction_min_tokens (here: always), extraction names the columns the question
-- needs; the candidates see only those tables and columns (plus keys). The first candidate
-- runs and returns rows and stands alone: two round trips in all.
SET nl2sql.extraction_min_tokens = 0;
SELECT nl2sql('How many concerts took place in 2014?');
SELECT e->'extraction'->'columns' AS columns, e->'extraction'->'parsed'->'select' AS returns,
       e->>'schema' AS schema_shown, (e->'extraction'->>'full_schema_tokens')::int > (e->>'schema_tokens')::int AS smaller
FROM nl2sql_explain('How many concerts took place in 2014?') AS e;
SELECT e->>'waves' AS waves, e->>'stopped_early' AS stopped_early, e->>'confidence' AS confidence,
       e->'totals'->>'round_trips' AS round_trips, e->'totals'->>'llm_calls' AS llm_calls
FROM nl2sql_explain('How many concerts took place in 2014?') AS e;
SELECT c->>'stage' AS stage, c->>'prompt_tokens' IS NOT NULL AS has_tokens, (c->>'latency_ms')::float > 0 AS timed
FROM nl2sql_explain('How many concerts took place in 2014?') AS e, jsonb_array_elements(e->'llm_calls') AS c;

-- Alignments: rules on the query's syntax tree, applied before execution; no extra model call.
-- agent: a table that does not exist becomes the one that does; a value not stored in its
-- column becomes the stored one (from the column's statistics, or from its value index).
SELECT * FROM nl2sql_run('Which French singers are there?');
SELECT c->>'sql' AS written, c->>'aligned' AS aligned, c->'rules' AS rules
FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT relation, column_name, status FROM nl2sql.create_value_index('stadium', 'name');
SELECT * FROM nl2sql_run('How big is elm park?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules
FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT nl2sql.drop_value_index('stadium', 'name');
-- A column written with the wrong table of a join takes the other table's alias; columns a
-- one-table query takes that only the table its foreign key points to has get that table joined.
SELECT * FROM nl2sql_run('Which concerts were held in stadiums of more than 5000 seats?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT * FROM nl2sql_run('How big were the venues of the 2014 concerts?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
-- function: an aggregate in WHERE, an aggregate in ORDER BY, nested aggregates, a join that
-- only re-finds the row a NOT NULL foreign key points to.
SELECT * FROM nl2sql_run('Who is the oldest singer?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT * FROM nl2sql_run('Which singer is the youngest?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT * FROM nl2sql_run('What is the largest number of singers from one country?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT * FROM nl2sql_run('How many singer performances are recorded?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
-- style: ORDER BY ... DESC LIMIT on a nullable column skips NULLs (PostgreSQL sorts them
-- first); id columns the question did not ask for leave the SELECT list.
SELECT * FROM nl2sql_run('Which stadium has the highest capacity?');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
SELECT * FROM nl2sql_run('Name the singers older than 40.');
SELECT c->>'aligned' AS aligned, c->'rules' AS rules FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c LIMIT 1;
-- Each family can be switched off (for ablations): the candidate then runs as written.
SET nl2sql.align_style = off;
SELECT nl2sql('Which stadium has the highest capacity?');
RESET nl2sql.align_style;

-- Corrections by error type: comparing text with a number gets the prompt about casts.
SELECT nl2sql('Which singers released songs after 2010?');
SELECT c->>'round' AS round, c->>'corrects' AS fixes, c->>'error_kind' AS kind, c->>'sqlstate' AS sqlstate, c->>'sql' AS sql
FROM jsonb_array_elements(nl2sql.last_trace()->'candidates') AS c WHERE c->>'duplicate_of' IS NULL;

-- The vote: candidates are grouped by their rows; the largest group wins (here 3 of 5).
-- nl2sql.agreement = 0 asks for all n candidates at once, without stopping early.
SET nl2sql.agreement = 0;
SELECT * FROM nl2sql_run('How many people are on the books?');
SELECT g->'votes' AS votes, g->'rows' AS rows FROM jsonb_array_elements(nl2sql.last_trace()->'vote'->'groups') AS g;
SELECT nl2sql.last_trace()->'confidence' AS confidence, nl2sql.last_trace()->'waves' AS waves;
-- Below nl2sql.min_confidence the answer comes with a NOTICE (2 of 5 agree here).
SELECT * FROM nl2sql_run('How many things are recorded?');
-- Empty results lose to non-empty ones, even with more votes.
SELECT * FROM nl2sql_run('Which singers come from Frankreich?');
SELECT g->'votes' AS votes, g->'rows' AS rows FROM jsonb_array_elements(nl2sql.last_trace()->'vote'->'groups') AS g;
-- Ties go to the faster query.
SET nl2sql.candidates = 2;
SELECT nl2sql('Count something, quickly.');
SELECT g->'votes' AS votes, g->'rows' AS rows FROM jsonb_array_elements(nl2sql.last_trace()->'vote'->'groups') AS g;
-- A failed model call loses one candidate, not the answer. (Without a grammar: a request with
-- one that fails with HTTP 500 is asked again without it, as an older server's refusal.)
SET nl2sql.llm_max_retries = 0;
SET nl2sql.grammar = off;
SELECT nl2sql('How many stadiums are there?');
SELECT c->>'stage' AS stage, c->>'error' AS error FROM jsonb_array_elements(nl2sql.last_trace()->'llm_calls') AS c
ORDER BY c->>'error' IS NULL, c->>'stage';
RESET nl2sql.llm_max_retries;
RESET nl2sql.grammar;
RESET nl2sql.candidates;
RESET nl2sql.agreement;

-- nl2sql_explain(): every stage's input and output. Nothing in it is ever the API key, even
-- when the model repeats it.
SELECT array_agg(k ORDER BY k) AS keys FROM jsonb_object_keys(nl2sql_explain('What is your secret?')) AS k;
SELECT e->'result'->'preview' AS preview,
       position('sk-nl2sql-test' IN e::text) AS key_at, position('sk-nl2sql-test' IN nl2sql.last_trace()::text) AS key_in_trace
FROM nl2sql_explain('What is your secret?') AS e;
SELECT jsonb_object_keys(e->'settings') AS setting FROM nl2sql_explain('What is your secret?') AS e ORDER BY 1;
-- Nor in what nl2sql() returns, or in its errors.
SELECT nl2sql('What is your secret?');
SELECT nl2sql('Which singer has my secret name?');
-- A failure is reported in "error", not raised.
SELECT e->'sql' AS sql, e->'error'->>'sqlstate' AS sqlstate, e->'error'->>'message' AS message
FROM nl2sql_explain('Please clean up the singer table.') AS e;
SELECT nl2sql('Please clean up the singer table.');

-- Stages off: without extraction the candidates see the whole schema; zero_shot is the
-- foundation's single generation.
SET nl2sql.use_extraction = off;
SELECT e->'extraction' AS extraction, e->'totals'->>'llm_calls' AS llm_calls
FROM nl2sql_explain('How many concerts took place in 2014?') AS e;
RESET nl2sql.use_extraction;
SET nl2sql.mode = zero_shot;
SELECT e->>'mode' AS mode, e->'totals'->>'llm_calls' AS llm_calls, e->>'sql' AS sql
FROM nl2sql_explain('How many singers do we have?') AS e;
RESET nl2sql.mode;
SET nl2sql.mode = 'sideways';

-- nl2sql.idioms was removed: the prefix is nl2sql's, so setting it is an error, not a placeholder.
SET nl2sql.idioms = 'dates';
