-- user.created messages carry the user's address and name, as user.updated ones do: a deleted user's messages of
-- both kinds are deleted with them (sql/functions/outbox.sql), found through one index.
DROP INDEX outbox_user_updates;
CREATE INDEX outbox_user_messages ON outbox ((payload ->> 'user_id'))
    WHERE event_type IN ('user.created', 'user.updated');
