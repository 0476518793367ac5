-- Messages are kept a while after they settle, for `rbac outbox list`, and then deleted by the sweeper
-- (PostgresOutbox.prune): sent ones by when they were delivered, dead ones by when their last attempt was due.
-- These indexes find them without reading the messages still kept.
CREATE INDEX outbox_sent ON outbox (delivered_at) WHERE status = 'sent';
CREATE INDEX outbox_dead ON outbox (next_attempt_at) WHERE status = 'dead';
