\set c random(1, 10000)
\set k random(1, 3)
SELECT user_has_permission(md5('c' || :c)::uuid, md5('u' || (3 * (:c - 1) + :k))::uuid, 'budget.edit');
