-- Mixed-case, quoted, unicode and reserved-word names work end to end: the model is shown
-- names as they must be written, and the query runs as written.
CREATE TABLE "Order Items" ("Kind" text, "Größe" int, note text);
INSERT INTO "Order Items" VALUES ('Äpfel', 3, 'x'), ('Äpfel', 4, NULL), ('Birnen', 5, 'y');
COMMENT ON TABLE "Order Items" IS 'Items of orders, with their size';
COMMENT ON COLUMN "Order Items"."Größe" IS 'Size in cm';
CREATE TABLE "user" ("select" text PRIMARY KEY, "from" date);
INSERT INTO "user" VALUES ('a', '2024-01-01'), ('b', '2024-02-01');

SELECT line FROM regexp_split_to_table(nl2sql.schema_prompt(), E'\n') AS line
WHERE line ~ '(Order|Kind|Größe|note|user|select|from)';

SELECT * FROM nl2sql_run('[names] total size per kind');
SELECT * FROM nl2sql_run('[reserved] list the users');

-- A database without tables.
CREATE DATABASE nl2sql_empty;
\c nl2sql_empty
SET client_min_messages = warning;
CREATE EXTENSION nl2sql CASCADE;
RESET client_min_messages;
SELECT nl2sql('How many singers do we have?');
\echo :LAST_ERROR_SQLSTATE
\c concert_singer
DROP DATABASE nl2sql_empty;

DROP TABLE "Order Items", "user";
