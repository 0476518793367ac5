-- The collaboration core: couples (the tenants), users, roles and permissions as data, memberships,
-- invitations, service keys and the audit logs. Tables, indexes and table privileges only: functions,
-- triggers and views live in sql/functions/, row-level security in policies/rls.sql.

CREATE SCHEMA rbac;
COMMENT ON SCHEMA rbac IS 'Private helpers of the collaboration functions; not part of the API.';

-- rbac_app is what the application (and Supabase-style clients) run as: no BYPASSRLS, SELECT on tenant tables
-- through row-level security, EXECUTE on the API functions. Members of rbac_operator act as the operator (full
-- rights) when no end-user JWT claims are set. Roles are cluster-wide, so several databases in one cluster may
-- race to create them.
DO $$
BEGIN
    BEGIN
        CREATE ROLE rbac_app NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE rbac_operator NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
END $$;

CREATE TABLE couples (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Advanced by every membership write (and locking the row serialises owner changes); permission caches
    -- compare it with what they hold.
    revision bigint NOT NULL DEFAULT 0
);

CREATE TABLE users (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email text NOT NULL CHECK (email ~ '^[^@\s]+@[^@\s]+$' AND length(email) <= 320),
    display_name text CHECK (display_name IS NULL OR length(btrim(display_name)) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);
-- Email addresses are unique whatever their case.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE permissions (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]*\.[a-z][a-z_]*$'),
    description text NOT NULL
);

CREATE TABLE roles (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]*$'),
    description text NOT NULL,
    -- Display order: lower is more powerful.
    rank integer NOT NULL
);

-- The effective permissions of each role (inheritance in the policy file is resolved when it is applied).
CREATE TABLE role_permissions (
    role text NOT NULL REFERENCES roles (name) ON DELETE CASCADE,
    permission text NOT NULL REFERENCES permissions (name) ON DELETE CASCADE,
    PRIMARY KEY (role, permission)
);

-- Which roles a holder of `role` may give to others (by grant or invitation).
CREATE TABLE role_grants (
    role text NOT NULL REFERENCES roles (name) ON DELETE CASCADE,
    grantable_role text NOT NULL REFERENCES roles (name) ON DELETE CASCADE,
    PRIMARY KEY (role, grantable_role)
);

-- Counts the changes to what roles grant, as couples.revision counts a couple's membership changes. A role's
-- permissions read at policy revision P are the ones every row user_roles returns with P.
CREATE TABLE policy_revision (
    revision bigint NOT NULL
);
-- One row, always.
CREATE UNIQUE INDEX policy_revision_one_row ON policy_revision ((true));
INSERT INTO policy_revision (revision) VALUES (0);

-- What `rbac migrate` last applied from policies/ (policy.json and the row-level security scripts), by
-- checksum: a migrate run whose policy is unchanged applies nothing, and so takes no lock on couples or
-- memberships and reads none of their rows, at any size.
CREATE TABLE applied_policy (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    checksum text NOT NULL,
    -- Of the row-level security scripts alone: they take exclusive locks on the tables they secure, so they
    -- run only when they changed.
    scripts_checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL REFERENCES roles (name),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (couple_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);

CREATE TABLE invitations (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    -- SHA-256 of the token; the token itself never reaches the database.
    token_hash bytea NOT NULL CHECK (length(token_hash) = 32),
    role text NOT NULL REFERENCES roles (name),
    -- When set, only the user with this address may accept.
    email text CHECK (email IS NULL OR (email ~ '^[^@\s]+@[^@\s]+$' AND length(email) <= 320)),
    invited_by uuid REFERENCES users (id) ON DELETE SET NULL,
    inviter_label text,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    accepted_at timestamptz,
    accepted_by uuid REFERENCES users (id) ON DELETE SET NULL,
    revoked_at timestamptz,
    PRIMARY KEY (couple_id, id),
    CHECK (accepted_at IS NULL OR revoked_at IS NULL)
);
CREATE UNIQUE INDEX invitations_token_hash_key ON invitations (token_hash);

-- API keys of backend services (not tenant data): only the SHA-256 of each key is stored.
CREATE TABLE service_keys (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 100),
    key_hash bytea NOT NULL CHECK (length(key_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE UNIQUE INDEX service_keys_key_hash_key ON service_keys (key_hash);

-- Each couple's history: one row per changed membership, invitation or budget row.
CREATE TABLE audit_log (
    couple_id uuid NOT NULL,
    id bigint GENERATED ALWAYS AS IDENTITY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor_id uuid,
    actor_label text NOT NULL,
    action text NOT NULL,
    before jsonb,
    after jsonb,
    PRIMARY KEY (couple_id, id)
);

-- Changes that belong to no couple and reach every couple at once: the access policy, the service keys, the
-- budget row limits, and users (a couple's log records memberships, not the people behind them).
CREATE TABLE operator_audit_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor_label text NOT NULL,
    action text NOT NULL,
    before jsonb,
    after jsonb
);

-- Nothing is open to PUBLIC. rbac_app reads tenant tables through row-level security and calls the API
-- functions, which check permissions themselves (sql/functions/privileges.sql); the operator's log is no
-- couple's data.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA rbac TO rbac_app;
GRANT SELECT ON couples, users, memberships, audit_log, roles, permissions, role_permissions, role_grants TO rbac_app;
GRANT SELECT (couple_id, id, role, email, invited_by, inviter_label, created_at, expires_at, accepted_at,
              accepted_by, revoked_at) ON invitations TO rbac_app;
GRANT SELECT ON operator_audit_log TO rbac_operator;
