-- A request sent with an Idempotency-Key that failed as the database went away while a statement of it that could
-- commit was sent: it may have been done. Its row is kept, neither held nor answered, so that the request sent
-- again is refused (409 outcome_unknown) rather than run a second time.
ALTER TABLE idempotent_requests ADD COLUMN unconfirmed boolean NOT NULL DEFAULT false;
ALTER TABLE idempotent_requests DROP CONSTRAINT idempotent_requests_check;
-- Running (held), answered, or unconfirmed: one of the three.
ALTER TABLE idempotent_requests ADD CONSTRAINT idempotent_requests_state
    CHECK (num_nonnulls(status, claimed_until) + unconfirmed::integer = 1);
