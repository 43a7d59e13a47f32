-- Trouble with the model endpoint gives a clear error with its own SQLSTATE, in bounded time.
SET nl2sql.llm_max_retries = 0;
-- Four attempts, none retried: the first answer is asked with log probabilities, with the
-- grammar (on by default) and once without it, then without log probabilities, the same two.
SELECT nl2sql('[http500] anything');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[garbage] anything');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql('[truncated] anything');
SELECT nl2sql('[empty] anything');
SELECT nl2sql('[not-found] anything');
-- This endpoint echoes the API key it got in its error body; nl2sql never shows it.
SELECT nl2sql('[unauthorized] anything');
\echo :LAST_ERROR_SQLSTATE
RESET nl2sql.llm_max_retries;

-- An answer without SQL gets a correction round, then an error.
SELECT nl2sql('[no-sql] anything');
\echo :LAST_ERROR_SQLSTATE

-- HTTP 429 and 5xx are retried with backoff (nl2sql.llm_max_retries, default 2): one request
-- (zero_shot), answered on its third attempt.
SET nl2sql.mode = zero_shot;
SELECT nl2sql('[flaky] how many stadiums are there?');
SELECT (nl2sql.last_trace()->'llm_calls'->0->>'attempts')::int AS attempts;
RESET nl2sql.mode;

-- A model slower than nl2sql.llm_timeout.
SET nl2sql.llm_timeout = '500ms';
SELECT nl2sql('[slow] anything');
\echo :LAST_ERROR_SQLSTATE
RESET nl2sql.llm_timeout;

-- Nothing listening at the endpoint.
SET nl2sql.llm_url = 'http://127.0.0.1:9/v1';
SELECT nl2sql('How many singers do we have?');
\echo :LAST_ERROR_SQLSTATE

-- No endpoint configured: the hint says how to configure one.
SET nl2sql.llm_url = '';
SELECT nl2sql('How many singers do we have?');
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.llm_url = 'ftp://example.com';
SELECT nl2sql('How many singers do we have?');
RESET nl2sql.llm_url;

-- A URL carrying a credential or a query string: every role can read it with SHOW.
SET nl2sql.llm_url = 'http://user:secret@127.0.0.1:8080/v1';
SET nl2sql.embedding_url = 'https://api.example.com/v1?key=sk-123';

-- Unknown nl2sql.* settings are rejected (typo protection).
SET nl2sql.llm_urll = 'x';
