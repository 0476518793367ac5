-- Each claim of a message for delivery (PostgresOutbox.claim) draws a token of its own, and a worker records the
-- outcome only while its token is the message's: one that answers after its lease ran out, when another worker
-- has claimed the message since, records nothing. The attempts count cannot tell claims apart, since
-- `rbac outbox retry` starts it afresh.
ALTER TABLE outbox ADD COLUMN claim uuid;
