-- The examples library: question/SQL pairs shown to the model as few-shot.
\set VERBOSITY default

-- The starter library comes with the extension: idioms over schemas of nl2sql's own. Every
-- one of its queries runs on those schemas (created here).
SELECT source, count(*), bool_and(relations = '{}') AS reads_nothing_here, bool_and(enabled) AS enabled
FROM nl2sql.examples GROUP BY source;
CREATE SCHEMA starter;
SET search_path = starter, public;
CREATE TABLE customers (id int PRIMARY KEY, name text, city text, joined_on date);
CREATE TABLE products (id int PRIMARY KEY, name text, category text, price numeric);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, placed_at timestamp, status text, total numeric);
CREATE TABLE order_items (order_id int REFERENCES orders, product_id int REFERENCES products, quantity int, unit_price numeric);
CREATE TABLE teachers (id int PRIMARY KEY, name text, hired_on date);
CREATE TABLE classes (id int PRIMARY KEY, title text, teacher_id int REFERENCES teachers);
CREATE TABLE students (id int PRIMARY KEY, name text, birth_date date, class_id int REFERENCES classes);
CREATE TABLE courses (id int PRIMARY KEY, title text, credits int);
CREATE TABLE enrolments (student_id int REFERENCES students, course_id int REFERENCES courses, grade numeric);
CREATE TABLE departments (id int PRIMARY KEY, name text, budget numeric);
CREATE TABLE employees (id int PRIMARY KEY, name text, manager_id int REFERENCES employees, department_id int REFERENCES departments,
                        salary numeric, hired_on date, email text);
CREATE TABLE authors (id int PRIMARY KEY, name text, country text);
CREATE TABLE books (id int PRIMARY KEY, title text, author_id int REFERENCES authors, published_year int, genre text, pages int);
CREATE TABLE members (id int PRIMARY KEY, name text);
CREATE TABLE loans (book_id int REFERENCES books, member_id int REFERENCES members, loaned_on date, returned_on date);
DO $$
DECLARE
    e record;
    failed int := 0;
BEGIN
    FOR e IN SELECT id, sql FROM nl2sql.examples WHERE source = 'builtin' LOOP
        BEGIN
            EXECUTE e.sql;
        EXCEPTION WHEN OTHERS THEN
            failed := failed + 1;
            RAISE NOTICE 'built-in example % fails: %', e.id, SQLERRM;
        END;
    END LOOP;
    RAISE NOTICE '% built-in examples failed', failed;
END
$$;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA starter CASCADE;
RESET client_min_messages;

-- Adding an example runs its query in the sandbox first, with the caller's rights; the
-- question is masked (names and values as placeholders) for retrieval by shape.
SELECT nl2sql.add_example('How many singers come from France?', $$SELECT count(*) FROM singer WHERE country = 'France'$$) > 0 AS added;
SELECT question, question_masked, sql, relations, source, executed, added_by
FROM nl2sql.examples WHERE source = 'user';
-- Examples nl2sql would not run are refused, with PostgreSQL's own SQLSTATE.
SELECT nl2sql.add_example('Who?', 'SELECT nme FROM singer');
SELECT nl2sql.add_example('Remove them', 'DELETE FROM singer');
SELECT nl2sql.add_example('Wait', 'SELECT pg_sleep(1)');
SELECT nl2sql.add_example('Two', 'SELECT 1; SELECT 2');
SELECT nl2sql.add_example('', 'SELECT 1');
SELECT nl2sql.add_example('Nothing', '  ');
SELECT count(*) AS user_examples FROM nl2sql.examples WHERE source = 'user';

-- Curating is a right: nl2sql_curator (superusers have it). Nobody writes the store directly.
CREATE ROLE ex_reader;
CREATE ROLE ex_curator;
GRANT nl2sql_curator TO ex_curator;
GRANT SELECT ON stadium TO ex_reader, ex_curator;
SET ROLE ex_reader;
SELECT nl2sql.add_example('How many stadiums are there?', 'SELECT count(*) FROM stadium');
SELECT nl2sql.remove_example(1);
SELECT nl2sql.enable_example(1, false);
INSERT INTO nl2sql.example_store (question, question_masked, sql, source, executed, added_by, embedding)
VALUES ('q', 'q', 'SELECT 1', 'user', true, 10, array_fill(0, ARRAY[256])::vector);
RESET ROLE;
SET ROLE ex_curator;
SELECT nl2sql.add_example('How many stadiums are there?', 'SELECT count(*) FROM stadium', 'stadium is a venue') > 0 AS added;
-- A curator cannot add an example reading what it may not read.
SELECT nl2sql.add_example('How many singers?', 'SELECT count(*) FROM singer');
UPDATE nl2sql.example_store SET enabled = false;
RESET ROLE;

-- A role sees only examples whose SQL reads what it may read, as of now: GRANT and REVOKE
-- take effect at once.
SET ROLE ex_reader;
SELECT question, hint, added_by FROM nl2sql.examples WHERE source = 'user' ORDER BY id;
RESET ROLE;
GRANT SELECT ON singer TO ex_reader;
SET ROLE ex_reader;
SELECT question FROM nl2sql.examples WHERE source = 'user' ORDER BY id;
RESET ROLE;
REVOKE SELECT ON singer FROM ex_reader;
SET ROLE ex_reader;
SELECT question FROM nl2sql.examples WHERE source = 'user' ORDER BY id;
RESET ROLE;

-- Disable, enable, remove (curators).
SELECT nl2sql.enable_example(id, false) FROM nl2sql.examples WHERE question = 'How many stadiums are there?';
SELECT enabled FROM nl2sql.examples WHERE question = 'How many stadiums are there?';
SELECT nl2sql.enable_example(id) FROM nl2sql.examples WHERE question = 'How many stadiums are there?';
SET ROLE ex_curator;
SELECT nl2sql.remove_example(id) FROM nl2sql.examples WHERE question = 'How many stadiums are there?';
SELECT nl2sql.remove_example(-1);
RESET ROLE;
-- Nor may a curator touch an example about tables it may not read (singer): as if absent.
SELECT nl2sql.add_example('How many singers?', 'SELECT count(*) FROM singer') AS singers \gset
SET ROLE ex_curator;
SELECT nl2sql.enable_example(:singers, false) AS disabled, nl2sql.remove_example(:singers) AS removed;
RESET ROLE;
SELECT enabled FROM nl2sql.examples WHERE id = :singers;

-- The settings: k examples (0, the default: none), and the generators candidates are asked with.
SHOW nl2sql.examples;
SHOW nl2sql.generators;
SET nl2sql.generators = 'open_sql, create_table';
SET nl2sql.generators = 'open_sql,sqlite';
SET nl2sql.generators = '';
RESET nl2sql.generators;

DROP OWNED BY ex_reader;
DROP OWNED BY ex_curator;
DROP ROLE ex_reader;
DROP ROLE ex_curator;
DELETE FROM nl2sql.example_store WHERE source = 'user';
