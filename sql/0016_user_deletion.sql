-- Deleting a user sets the invitations they made or accepted to name nobody: these indexes find them, as the
-- foreign keys' ON DELETE SET NULL must too, instead of reading every invitation.
CREATE INDEX invitations_invited_by_idx ON invitations (invited_by) WHERE invited_by IS NOT NULL;
CREATE INDEX invitations_accepted_by_idx ON invitations (accepted_by) WHERE accepted_by IS NOT NULL;
