-- Limits on invitations, so that a couple's account cannot be used to mail strangers in bulk: how many
-- invitations one couple may create in an hour (the operator's setting), and the email domains a couple may
-- invite when the operator sets them for it.
CREATE TABLE invitation_settings (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    per_couple_per_hour integer NOT NULL DEFAULT 50 CHECK (per_couple_per_hour BETWEEN 1 AND 100000)
);
INSERT INTO invitation_settings DEFAULT VALUES;

-- Empty: any domain.
ALTER TABLE couples ADD COLUMN invite_domains text[] NOT NULL DEFAULT '{}';

CREATE INDEX invitations_couple_created_at ON invitations (couple_id, created_at);
