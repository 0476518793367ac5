-- Access that ends on its own: a membership may hold until an instant, after which it grants nothing (the
-- predicates read expires_at; nothing has to run at that instant). An invitation may say until when the
-- membership it creates holds. An owner's membership never expires, so expiry never leaves a couple without
-- an owner.
ALTER TABLE memberships ADD COLUMN expires_at timestamptz;
ALTER TABLE memberships ADD CONSTRAINT memberships_owner_never_expires CHECK (expires_at IS NULL OR role <> 'owner');
CREATE INDEX memberships_expires_at ON memberships (expires_at) WHERE expires_at IS NOT NULL;

ALTER TABLE invitations ADD COLUMN membership_expires_at timestamptz;
ALTER TABLE invitations ADD CONSTRAINT invitations_owner_never_expires
    CHECK (membership_expires_at IS NULL OR role <> 'owner');
CREATE INDEX invitations_pending_expires_at ON invitations (expires_at)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

-- What the sweeper (public.sweep_expired) has recorded: one row per membership or invitation whose expiry it
-- wrote to the audit log and the outbox, keyed by the instant, so a membership given a new expiry that passes
-- again is recorded again.
CREATE TABLE expiries_recorded (
    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
    -- The member's user id, or the invitation's id.
    subject_id uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (couple_id, subject_id, expires_at)
);
CREATE INDEX expiries_recorded_recorded_at ON expiries_recorded (recorded_at);

GRANT SELECT (couple_id, id, role, email, invited_by, inviter_label, created_at, expires_at, accepted_at,
              accepted_by, revoked_at, membership_expires_at) ON invitations TO rbac_app;
