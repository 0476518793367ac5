-- user.updated messages carry the user's address and name; a deleted user's are deleted with them
-- (sql/functions/outbox.sql), found through this index without reading the rest of the outbox.
CREATE INDEX outbox_user_updates ON outbox ((payload ->> 'user_id')) WHERE event_type = 'user.updated';
