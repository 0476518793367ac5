-- Deleting a user: the operator adds users (a plain INSERT, or sign_in at a first sign-in) and deletes them;
-- an end user may delete themself.

-- Deletes user p_user_id, for the operator, or for that user alone. Their memberships go, each recorded in its
-- couple's log and announced as membership.removed; so do their identities. Invitations they made or accepted
-- stay, naming nobody. Refused (RBLST) while they are a couple's last active owner: the couple must get another
-- owner, or be deleted, first. What named the person in the operator's log (their address and name; an
-- identity's subject and address) is erased from it: the logs keep ids only, and the entries they made show
-- user:<id>.
CREATE OR REPLACE FUNCTION public.delete_user(p_user_id uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF NOT rbac.is_operator() AND rbac.require_user() IS DISTINCT FROM p_user_id THEN
        RAISE EXCEPTION 'permission denied: users can delete only themselves' USING ERRCODE = 'RBDEN';
    END IF;
    -- The rows it changes that others change too, locked first in the order they take them (an invitation,
    -- then a membership, then the user's and the couples' rows), so that the deletion waits for them instead
    -- of deadlocking with them.
    PERFORM FROM invitations WHERE invited_by = p_user_id OR accepted_by = p_user_id ORDER BY couple_id, id
        FOR UPDATE;
    PERFORM FROM memberships WHERE user_id = p_user_id ORDER BY couple_id FOR UPDATE;
    DELETE FROM users WHERE id = p_user_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % does not exist', p_user_id USING ERRCODE = 'RBNFD';
    END IF;
    PERFORM set_config('rbac.erasing', p_user_id::text, true);
    UPDATE operator_audit_log a SET (before, after) = (SELECT e.before, e.after FROM rbac.erased(a, p_user_id) e)
    WHERE a.action ~ '^(user|identity)\.' AND to_jsonb(a) <> to_jsonb(rbac.erased(a, p_user_id));
    PERFORM set_config('rbac.erasing', '', true);
END $$;
