-- Hostile model output, class 6: answers are read up to nl2sql.max_answer_bytes and parsed in
-- linear time with cancel honoured (the cancel itself: tests/test_security.py).
SET nl2sql.mode = zero_shot;
SELECT nl2sql('[huge-answer] a megabyte of words');
\echo :LAST_ERROR_SQLSTATE
SET nl2sql.max_answer_bytes = '2MB';
-- Many <think></think> pairs, many short lines after the query: parsed in linear time.
SELECT * FROM nl2sql_run('[think-flood] think a lot');
SELECT * FROM nl2sql_run('[line-flood] then ramble');
RESET nl2sql.max_answer_bytes;
RESET nl2sql.mode;
