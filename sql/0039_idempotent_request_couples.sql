-- The couple a request sent with an Idempotency-Key was made under (its path's /v1/couples/{couple}), so that
-- deleting the couple deletes the answers kept for it (its budget's rows, its members), which name no couple
-- in their bodies. NULL for a request under no couple.
ALTER TABLE idempotent_requests ADD COLUMN couple_id uuid;
CREATE INDEX idempotent_requests_couple ON idempotent_requests (couple_id) WHERE couple_id IS NOT NULL;
