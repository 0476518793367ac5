-- Budget dates (an expense's due date, a payment's date) are days of the years 1 to 9999, as the API and the CLI
-- read and write them: raw SQL stores none outside them, which no listing could show.
BEGIN;
\ir fixtures.psql
SELECT no_plan();

SELECT pg_temp.new_user('olivia');
SELECT pg_temp.new_couple('Olivia', 'olivia');
INSERT INTO expenses (couple_id, id, name, amount)
    VALUES (pg_temp.id('Olivia'), '00000000-0000-0000-0000-0000000000e1', 'Hall', 30);
INSERT INTO expense_payments (couple_id, expense_id, amount, paid_at)
    VALUES (pg_temp.id('Olivia'), '00000000-0000-0000-0000-0000000000e1', 5, '2026-01-01');

SELECT throws_ok(format('UPDATE %I SET %I = %L', t, c, day), '23514', NULL, format('no %s of %s', c, day))
FROM (VALUES ('expenses', 'due_date'), ('expense_payments', 'paid_at')) AS dated (t, c),
     unnest(ARRAY['infinity', '-infinity', '10000-01-01', '0001-12-31 BC']) AS day;
SELECT lives_ok(format('UPDATE %I SET %I = %L', t, c, day), format('a %s of %s', c, day))
FROM (VALUES ('expenses', 'due_date'), ('expense_payments', 'paid_at')) AS dated (t, c),
     unnest(ARRAY['0001-01-01', '9999-12-31']) AS day;
SELECT lives_ok('UPDATE expenses SET due_date = NULL', 'an expense without a due date');

SELECT * FROM finish();
ROLLBACK;
