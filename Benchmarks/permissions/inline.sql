\set c random(1, 10000)
\set k random(1, 3)
SELECT EXISTS (
    SELECT 1 FROM memberships m JOIN role_permissions rp ON rp.role = m.role
    WHERE m.couple_id = md5('c' || :c)::uuid AND m.user_id = md5('u' || (3 * (:c - 1) + :k))::uuid
      AND m.status = 'active' AND rp.permission = 'budget.edit');
