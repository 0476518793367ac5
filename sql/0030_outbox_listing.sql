-- `rbac outbox list` shows the newest messages first, all of them or one couple's (PostgresOutbox.messages).
-- The outbox keeps a week of sent messages by default: without these indexes each listing read and sorted all
-- of them, where the newest are found at the index's end.
CREATE INDEX outbox_created ON outbox (created_at);
CREATE INDEX outbox_couple_created ON outbox (couple_id, created_at) WHERE couple_id IS NOT NULL;
