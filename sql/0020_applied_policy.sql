-- What `rbac migrate` last applied from policies/ (policy.json and the row-level security scripts), by
-- checksum: a migrate run whose policy is unchanged applies nothing, and so takes no lock on couples or
-- memberships and reads none of their rows, at any size. `rbac policy apply` applies it whatever the checksum.
CREATE TABLE applied_policy (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON applied_policy FROM PUBLIC;
