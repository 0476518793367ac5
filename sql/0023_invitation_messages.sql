-- delete_user erases the address of each invitation the person accepted from the messages about it, and
-- rbac.erase_sealed_token the link from an invitation's email: both find an invitation's messages by its id.
-- Without this index the erasure read every message kept (a week of sent ones, by default) while the deletion
-- held the person's memberships; the one before it served only emails whose link was still sealed.
DROP INDEX outbox_sealed_invitation;
CREATE INDEX outbox_invitation_messages ON outbox ((payload ->> 'invitation_id'))
    WHERE payload ->> 'invitation_id' IS NOT NULL;
