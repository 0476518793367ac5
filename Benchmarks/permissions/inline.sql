\set c random(1, 10000)
\set k random(1, 3)
SELECT EXISTS (
    SELECT 1 FROM memberships m
    JOIN LATERAL (SELECT 1 FROM role_permissions rp WHERE rp.role = m.role AND rp.permission = 'budget.edit'
                  UNION ALL
                  SELECT 1 FROM couple_role_permissions crp
                  WHERE crp.couple_id = m.couple_id AND crp.role = m.role AND crp.permission = 'budget.edit'
                  LIMIT 1) granted ON true
    WHERE m.couple_id = md5('c' || :c)::uuid AND m.user_id = md5('u' || (3 * (:c - 1) + :k))::uuid
      AND m.status = 'active' AND (m.expires_at IS NULL OR m.expires_at > now()));
