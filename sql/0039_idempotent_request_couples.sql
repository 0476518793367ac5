-- The couple a request sent with an Idempotency-Key was made under (its path's /v1/couples/{couple}), so that
-- deleting the couple deletes the answers kept for it (its budget's rows, its members), which name no couple
-- in their bodies. NULL for a request under no couple. Not indexed: delete_couple reads every kept body anyway,
-- for the couple's creation, which names it and was made under no couple.
ALTER TABLE idempotent_requests ADD COLUMN couple_id uuid;
