-- Roles a couple defines for itself ("mom" may view the guests and the budget), beside the policy's. Names
-- follow the policy's rule, are unique in the couple and differ from every role of the policy, so a
-- membership's role names one role without saying which kind. Memberships and invitations therefore no longer
-- reference roles by foreign key: sql/functions/roles.sql checks the name against both tables.
CREATE TABLE couple_roles (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (name ~ '^[a-z][a-z_]*$' AND length(name) <= 63),
    description text NOT NULL CHECK (length(btrim(description)) BETWEEN 1 AND 500),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (couple_id, name)
);

CREATE TABLE couple_role_permissions (
    couple_id uuid NOT NULL,
    role text NOT NULL,
    permission text NOT NULL REFERENCES permissions (name) ON DELETE CASCADE,
    PRIMARY KEY (couple_id, role, permission),
    FOREIGN KEY (couple_id, role) REFERENCES couple_roles (couple_id, name) ON DELETE CASCADE
);

ALTER TABLE memberships DROP CONSTRAINT memberships_role_fkey;
ALTER TABLE invitations DROP CONSTRAINT invitations_role_fkey;

GRANT SELECT ON couple_roles, couple_role_permissions TO rbac_app;
