-- One couple's expenses, read by its owner as a direct SQL client (PostgREST-style claims).
\set c random(1, 100)
SELECT set_config('request.jwt.claims', json_build_object('sub', md5('u' || (3 * :c - 2))::uuid)::text, false);
SELECT count(*), sum(amount) FROM expenses WHERE couple_id = md5('c' || :c)::uuid;
