-- Editing and deleting a user: the operator adds users (a plain INSERT, or sign_in at a first sign-in), edits
-- and deletes them; an end user may change their own display name, and delete themself.

-- Changes user p_user_id's address and display name: NULL keeps either as it is; p_display_name '' removes the
-- name. The address is the operator's alone to change: sign_in links a provider's identity to the user who has
-- the address the provider verified, so a user who could set theirs could take over whoever signs in with it
-- next. The name is the operator's or the user's own. Refused: an address another user has (users_email_key's
-- unique_violation), an address rbac does not store (RBINV, saying why), a name longer than 200 characters,
-- holding control characters or showing nothing (RBINV). A change to what is there writes nothing.
CREATE OR REPLACE FUNCTION public.edit_user(p_user_id uuid, p_email text, p_display_name text) RETURNS users
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_user users;
    v_email text := rbac.stored_email(btrim(p_email));
    v_name text := nullif(btrim(p_display_name), '');
BEGIN
    IF NOT rbac.is_operator() THEN
        IF rbac.require_user() IS DISTINCT FROM p_user_id THEN
            RAISE EXCEPTION 'permission denied: users can edit only themselves' USING ERRCODE = 'RBDEN';
        END IF;
        IF p_email IS NOT NULL THEN
            RAISE EXCEPTION 'permission denied: only the operator changes a user''s email address'
                USING ERRCODE = 'RBDEN';
        END IF;
    END IF;
    IF p_email IS NOT NULL AND v_email IS NULL THEN
        RAISE EXCEPTION 'the new email address is not one rbac stores: %', rbac.email_refusal(btrim(p_email))
            USING ERRCODE = 'RBINV';
    END IF;
    IF length(v_name) > 200 OR rbac.has_control_character(v_name) THEN
        RAISE EXCEPTION 'a display name must be 1 to 200 characters, none of them control characters'
            USING ERRCODE = 'RBINV';
    END IF;
    IF rbac.is_blank(v_name) THEN
        RAISE EXCEPTION 'a display name must show something, not only spaces and invisible characters '
            '(zero-width spaces, joiners, fillers, ...)' USING ERRCODE = 'RBINV';
    END IF;
    SELECT * INTO v_user FROM users WHERE id = p_user_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % does not exist', coalesce(p_user_id::text, '(null)') USING ERRCODE = 'RBNFD';
    END IF;
    v_email := coalesce(v_email, v_user.email);
    v_name := CASE WHEN p_display_name IS NULL THEN v_user.display_name ELSE v_name END;
    IF (v_email, v_name) IS DISTINCT FROM (v_user.email, v_user.display_name) THEN
        UPDATE users SET email = v_email, display_name = v_name WHERE id = p_user_id RETURNING * INTO v_user;
    END IF;
    RETURN v_user;
END $$;

-- A member whose address changes, by edit_user or raw SQL, to one that a pending invitation of their couple is
-- bound to: that invitation could only fail them now, as after joining (rbac.memberships_guard), and is revoked.
-- The invitations are locked first, as others take them, and then their couples' rows (FOR KEY SHARE, in id
-- order): an invitation to the new address made meanwhile (create_invitation holds the couple's row) is seen
-- by the update, and one made after sees the member and is refused. A joining holds the user's row FOR SHARE
-- (rbac.memberships_guard): one in flight was waited for, and its couple is read here; one after waits for the
-- change and revokes by the new address itself.
CREATE OR REPLACE FUNCTION rbac.revoke_invitations_to_new_address() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couples uuid[] := ARRAY(SELECT couple_id FROM memberships WHERE user_id = NEW.id);
BEGIN
    PERFORM FROM invitations i WHERE i.couple_id = ANY (v_couples) AND rbac.invites_member(i, NEW.id)
        ORDER BY i.created_at, i.id FOR UPDATE;
    PERFORM FROM couples WHERE id = ANY (v_couples) ORDER BY id FOR KEY SHARE;
    UPDATE invitations i SET revoked_at = now() WHERE i.couple_id = ANY (v_couples) AND rbac.invites_member(i, NEW.id);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER users_new_address AFTER UPDATE OF email ON users
    FOR EACH ROW WHEN (lower(OLD.email) IS DISTINCT FROM lower(NEW.email))
    EXECUTE FUNCTION rbac.revoke_invitations_to_new_address();

-- Deletes user p_user_id, for the operator, or for that user alone. Their memberships go, each recorded in its
-- couple's log and announced as membership.removed, and with them the pending invitations they made (revoked); so
-- do their identities. Invitations they made or accepted stay, naming nobody: those they accepted lose the address
-- they were sent to, in the table and in the outbox's messages (couples' logs never hold it). Refused (RBLST) while
-- they are a couple's last active owner: the couple must get another owner, or be deleted, first. What named the
-- person in the operator's log (their address and name; an identity's subject and address) is erased from it: the
-- logs keep ids only, and the entries they made show user:<id>. Their user.created and user.updated messages go
-- from the outbox (rbac.outbox_user).
CREATE OR REPLACE FUNCTION public.delete_user(p_user_id uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_erased text[];
BEGIN
    IF NOT rbac.is_operator() AND rbac.require_user() IS DISTINCT FROM p_user_id THEN
        RAISE EXCEPTION 'permission denied: users can delete only themselves' USING ERRCODE = 'RBDEN';
    END IF;
    -- The rows it changes that others change too, locked first, so that the deletion waits for them instead of
    -- deadlocking with them. The user's inviting lock (rbac.lock_inviting) and then their row: an invitation
    -- they make or accept under way holds the row from its start and ends first, so that the invitations and
    -- memberships locked next are all there are (a grant to them waits for the row in rbac.memberships_guard,
    -- and then finds them gone). Then an invitation, then a membership, in the order others take them, before
    -- the memberships' deletion takes their couples' rows.
    PERFORM rbac.lock_inviting(p_user_id, false);
    PERFORM FROM users WHERE id = p_user_id FOR UPDATE;
    PERFORM FROM invitations WHERE invited_by = p_user_id OR accepted_by = p_user_id
        ORDER BY couple_id, created_at, id FOR UPDATE;
    PERFORM FROM memberships WHERE user_id = p_user_id ORDER BY couple_id FOR UPDATE;
    -- Before the invitations let go of the user, so that rbac.memberships_guard still sees them as the inviter
    -- of what they made.
    DELETE FROM memberships WHERE user_id = p_user_id;
    -- Their invitations let go of them here, each in one update, rather than by the foreign keys' SET NULL once
    -- the user is deleted: a second update of a row this transaction wrote checks every foreign key of it again,
    -- the other person's too, and waiting for that person's row, which their own deletion holds while it waits
    -- for this invitation, deadlocked the two. An invitation they accepted forgets its address as well.
    WITH released AS (
        UPDATE invitations i
        SET invited_by = nullif(i.invited_by, p_user_id), accepted_by = nullif(i.accepted_by, p_user_id),
            email = CASE WHEN i.accepted_by = p_user_id THEN NULL ELSE i.email END
        FROM (SELECT id, accepted_by = p_user_id AND email IS NOT NULL AS erasing FROM invitations
              WHERE invited_by = p_user_id OR accepted_by = p_user_id) o
        WHERE i.id = o.id
        RETURNING i.id::text, o.erasing)
    SELECT array_agg(id) FILTER (WHERE erasing) INTO v_erased FROM released;
    -- Found through outbox_invitation_messages (sql/0023), and only when there is an address to erase.
    IF v_erased IS NOT NULL THEN
        UPDATE outbox SET payload = payload || '{"email": null}'
        WHERE payload ->> 'invitation_id' = ANY (v_erased) AND payload ->> 'email' IS NOT NULL;
    END IF;
    -- An answer kept for an Idempotency-Key (sql/0037) that names them (the user, a membership, a listing of
    -- members) holds what they were; sent again, that request runs again instead.
    DELETE FROM idempotent_requests WHERE position(convert_to(p_user_id::text, 'UTF8') IN body) > 0;
    DELETE FROM users WHERE id = p_user_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % does not exist', coalesce(p_user_id::text, '(null)') USING ERRCODE = 'RBNFD';
    END IF;
    PERFORM set_config('rbac.erasing', p_user_id::text, true);
    -- The ids the entries hold as operator_audit_log_people indexes them; rbac.erased says which it names, and
    -- the entries it leaves as they were are not written.
    WITH erasing AS (
        SELECT a.id, e.before, e.after
        FROM operator_audit_log a CROSS JOIN LATERAL rbac.erased(a, p_user_id) e
        WHERE a.action ~ '^(user|identity)\.'
          AND ARRAY[a.before ->> 'id', a.after ->> 'id', a.before ->> 'user_id', a.after ->> 'user_id']
              @> ARRAY[p_user_id::text]
          AND (e.before, e.after) IS DISTINCT FROM (a.before, a.after))
    UPDATE operator_audit_log a SET (before, after) = (e.before, e.after) FROM erasing e WHERE a.id = e.id;
    PERFORM set_config('rbac.erasing', '', true);
END $$;
