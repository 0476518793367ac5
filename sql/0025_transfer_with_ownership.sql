-- couple.transfer goes with ownership: transfer_ownership (sql/functions/memberships.sql) hands over only what
-- the acting user owns, so a couple's role that granted it answered "allowed" to a hand-over its holders would
-- be refused. No couple's role grants it (rbac.known_permissions says why when one is asked to); the roles that
-- did lose it here, and their couples' revisions move on, so caches drop the sets that held it.
DELETE FROM couple_role_permissions WHERE permission = 'couple.transfer';
ALTER TABLE couple_role_permissions ADD CONSTRAINT couple_role_permissions_not_transfer
    CHECK (permission <> 'couple.transfer');
