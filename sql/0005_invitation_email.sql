-- Invitation emails go through the outbox too. An invitation.created message may carry the invitation's token
-- sealed (AES-256-GCM) under the delivery key, with the row's id as associated data: the database never holds a
-- usable link. The box is erased once the message is sent or dead, and when the invitation is accepted or
-- revoked.
ALTER TABLE outbox DROP CONSTRAINT outbox_channel_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_channel_check CHECK (channel IN ('webhook', 'email'));
ALTER TABLE outbox ADD CONSTRAINT outbox_destination CHECK ((channel = 'webhook') = (endpoint_id IS NOT NULL));
ALTER TABLE outbox ADD COLUMN token_box bytea;
CREATE INDEX outbox_sealed_invitation ON outbox ((payload ->> 'invitation_id')) WHERE token_box IS NOT NULL;
