-- What each couple's role grants, as one text: its permissions sorted and space-separated, the form user_roles
-- returns and permission caches key their copies by. Aggregating and sorting a role's rows again for every check
-- of one of its holders made loading those checks slower than the policy's roles'; the triggers of
-- couple_role_permissions (sql/functions/roles.sql) keep this instead. A role that grants nothing has no row.
CREATE TABLE couple_role_sets (
    couple_id uuid NOT NULL,
    role text NOT NULL,
    permissions text NOT NULL,
    PRIMARY KEY (couple_id, role),
    FOREIGN KEY (couple_id, role) REFERENCES couple_roles (couple_id, name) ON DELETE CASCADE
);

INSERT INTO couple_role_sets (couple_id, role, permissions)
SELECT couple_id, role, string_agg(permission, ' ' ORDER BY permission)
FROM couple_role_permissions GROUP BY couple_id, role;
