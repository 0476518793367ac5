-- Who belongs to a couple, with which role. Each function checks the acting user's permission (the operator
-- may do anything); the memberships_guard trigger keeps an active owner in every couple.

-- Before any membership change: lock the couple row and advance its revision (so concurrent owner changes
-- queue up, and REPEATABLE READ / SERIALIZABLE writers conflict instead of acting on a stale snapshot), then
-- refuse any change that leaves the couple without an active owner. Applies to every client and to raw SQL;
-- a couple being deleted (its row already gone) may lose all its members, and gains none: a member added while
-- it is deleted waits for the deletion and is then refused as for any missing couple (RBNFD), not by the
-- foreign key; a member added while the user is deleted, likewise. An update that changes nothing (suspending
-- a suspended member, granting the role held) is written as it is: no revision, no audit entry, no notice, no
-- webhook.
CREATE OR REPLACE FUNCTION rbac.memberships_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couple_id uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.couple_id ELSE NEW.couple_id END;
    v_couple_name text;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW IS NOT DISTINCT FROM OLD THEN
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' AND NEW.couple_id <> OLD.couple_id THEN
        RAISE EXCEPTION 'a membership cannot move to another couple' USING ERRCODE = 'RBINV';
    END IF;
    -- Before the couple's row, as delete_user takes them. FOR SHARE, not the foreign key's FOR KEY SHARE: an
    -- address change (rbac.revoke_invitations_to_new_address) waits for this joining and then sees the member,
    -- or this one waits for it and then revokes by the new address below.
    IF TG_OP = 'INSERT' AND NOT EXISTS (SELECT FROM public.users WHERE id = NEW.user_id FOR SHARE) THEN
        RAISE EXCEPTION 'user % does not exist', NEW.user_id USING ERRCODE = 'RBNFD';
    END IF;
    -- The new member's pending invitations to the couple could only fail them now: revoked below, each recorded
    -- and announced as any revocation. grant_role and accept_invitation locked them before the couple's row
    -- (rbac.lock_invitations_to, where two joinings of one person also wait for each other); those made since,
    -- with the couple's row, rbac.lock_couple_joined locks. None is left pending: one made later sees the member and
    -- is refused. Raw SQL, which holds no lock of the couple's, may still make one in between, and this then wait
    -- for it below, holding the couple's row.
    IF TG_OP = 'INSERT' THEN
        PERFORM rbac.lock_couple_joined(v_couple_id, NEW.user_id);
    END IF;
    UPDATE public.couples SET revision = revision + 1 WHERE id = v_couple_id RETURNING name INTO v_couple_name;
    IF NOT FOUND AND TG_OP = 'DELETE' THEN
        RETURN OLD;
    ELSIF NOT FOUND THEN
        RAISE EXCEPTION 'couple % does not exist', v_couple_id USING ERRCODE = 'RBNFD';
    END IF;
    IF TG_OP = 'INSERT' THEN
        UPDATE public.invitations i SET revoked_at = now()
        WHERE i.couple_id = NEW.couple_id AND rbac.invites_member(i, NEW.user_id);
    END IF;
    -- A member who goes takes the pending invitations they made with them: each was made on their authority,
    -- and a link kept would let them, or whoever they gave it to, back in. Revoked, each recorded and announced
    -- as any revocation. remove_member and leave_couple locked them first (rbac.lock_invitations_from), as
    -- delete_user locks every invitation the user made.
    IF TG_OP = 'DELETE' THEN
        UPDATE public.invitations i SET revoked_at = now()
        WHERE i.couple_id = OLD.couple_id AND i.invited_by = OLD.user_id AND rbac.invitation_status(i) = 'pending';
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.role = 'owner' AND OLD.status = 'active'
       AND (TG_OP = 'DELETE' OR NEW.role <> 'owner' OR NEW.status <> 'active')
       AND NOT EXISTS (
           SELECT 1 FROM public.memberships
           WHERE couple_id = OLD.couple_id AND role = 'owner' AND status = 'active' AND user_id <> OLD.user_id)
    THEN
        RAISE EXCEPTION 'couple "%" must keep at least one owner', v_couple_name
            USING ERRCODE = 'RBLST',
                  HINT = 'make another member an owner first (transfer ownership), then try again';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

CREATE OR REPLACE TRIGGER memberships_guard BEFORE INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.memberships_guard();

-- The member's row, locked; raises RBNFD when p_user_id is not a member of the couple.
CREATE OR REPLACE FUNCTION rbac.lock_member(p_couple_id uuid, p_user_id uuid) RETURNS memberships
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_member memberships;
BEGIN
    SELECT * INTO v_member FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % is not a member of couple %', coalesce(p_user_id::text, '(null)'), p_couple_id
            USING ERRCODE = 'RBNFD';
    END IF;
    RETURN v_member;
END $$;

-- Gives p_user_id the role p_role until p_expires_at (NULL: for good): adds them as an active member, or
-- changes the role and expiry they hold (granting the same role with another expiry, or none, changes only
-- the expiry). The actor needs roles.assign and must be allowed to give both the new role and the member's
-- current one.
-- Dropped first: it gained p_expires_at, and an added parameter makes another function. privileges.sql grants
-- it again.
DROP FUNCTION IF EXISTS public.grant_role(uuid, uuid, text);
CREATE OR REPLACE FUNCTION public.grant_role(
    p_couple_id uuid, p_user_id uuid, p_role text, p_expires_at timestamptz DEFAULT NULL
) RETURNS memberships
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'roles.assign');
    v_existing memberships;
    v_result memberships;
BEGIN
    PERFORM rbac.require_role(p_couple_id, p_role);
    PERFORM rbac.require_expiry(p_role, p_expires_at);
    PERFORM rbac.require_user_exists(p_user_id);
    -- The invitations and the membership before the role, which require_grantable holds, as delete_couple takes
    -- them.
    PERFORM rbac.lock_invitations_to(p_couple_id, p_user_id);
    PERFORM rbac.require_couple(p_couple_id);  -- deleted while this waited: say so, not what else is missing
    SELECT * INTO v_existing FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id FOR UPDATE;
    PERFORM rbac.require_grantable(p_couple_id, v_actor, p_role);
    IF v_existing.user_id IS NULL THEN  -- no member yet
        BEGIN
            INSERT INTO memberships (couple_id, user_id, role, expires_at)
            VALUES (p_couple_id, p_user_id, p_role, p_expires_at)
            RETURNING * INTO v_result;
            RETURN v_result;
        EXCEPTION WHEN unique_violation THEN
            -- They joined since the SELECT (an invitation of theirs accepted meanwhile): the grant changes the
            -- role they now hold, as for any member.
            SELECT * INTO v_existing FROM memberships
            WHERE couple_id = p_couple_id AND user_id = p_user_id FOR UPDATE;
            IF NOT FOUND THEN  -- a snapshot older than their joining (REPEATABLE READ): run the grant again
                RAISE EXCEPTION 'user % joined couple % meanwhile', p_user_id, p_couple_id
                    USING ERRCODE = 'serialization_failure';
            END IF;
        END;
    END IF;
    PERFORM rbac.require_grantable(p_couple_id, v_actor, v_existing.role);
    UPDATE memberships SET role = p_role, expires_at = p_expires_at
    WHERE couple_id = p_couple_id AND user_id = p_user_id
    RETURNING * INTO v_result;
    RETURN v_result;
END $$;

-- The member's row, locked, after checking the actor may manage them: collaborators.manage, and a role that
-- may give the member's role (a partner cannot suspend an owner).
CREATE OR REPLACE FUNCTION rbac.require_manageable(p_couple_id uuid, p_user_id uuid) RETURNS memberships
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'collaborators.manage');
    v_member memberships := rbac.lock_member(p_couple_id, p_user_id);
BEGIN
    PERFORM rbac.require_grantable(p_couple_id, v_actor, v_member.role);
    RETURN v_member;
END $$;

-- Suspends or reactivates a member, as require_manageable allows.
CREATE OR REPLACE FUNCTION rbac.set_member_status(p_couple_id uuid, p_user_id uuid, p_status text) RETURNS memberships
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_result memberships;
BEGIN
    PERFORM rbac.require_manageable(p_couple_id, p_user_id);
    UPDATE memberships SET status = p_status WHERE couple_id = p_couple_id AND user_id = p_user_id
    RETURNING * INTO v_result;
    RETURN v_result;
END $$;

CREATE OR REPLACE FUNCTION public.suspend_member(p_couple_id uuid, p_user_id uuid) RETURNS memberships
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT rbac.set_member_status(p_couple_id, p_user_id, 'suspended')
$$;

CREATE OR REPLACE FUNCTION public.reactivate_member(p_couple_id uuid, p_user_id uuid) RETURNS memberships
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT rbac.set_member_status(p_couple_id, p_user_id, 'active')
$$;

CREATE OR REPLACE FUNCTION public.remove_member(p_couple_id uuid, p_user_id uuid) RETURNS memberships
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_result memberships;
BEGIN
    PERFORM rbac.lock_invitations_from(p_couple_id, p_user_id);
    PERFORM rbac.require_manageable(p_couple_id, p_user_id);
    DELETE FROM memberships WHERE couple_id = p_couple_id AND user_id = p_user_id RETURNING * INTO v_result;
    RETURN v_result;
END $$;

-- The acting user leaves the couple. The operator names who leaves; a member may name only themself.
CREATE OR REPLACE FUNCTION public.leave_couple(p_couple_id uuid, p_user_id uuid DEFAULT NULL) RETURNS memberships
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_user uuid;
    v_result memberships;
BEGIN
    PERFORM rbac.require_couple(p_couple_id);
    v_user := rbac.subject_user(p_user_id, 'name the member who leaves',
        'members can leave only for themselves; remove_member removes others');
    PERFORM rbac.lock_invitations_from(p_couple_id, v_user);
    PERFORM rbac.lock_member(p_couple_id, v_user);
    DELETE FROM memberships WHERE couple_id = p_couple_id AND user_id = v_user RETURNING * INTO v_result;
    RETURN v_result;
END $$;

-- Makes p_new_owner (an active member) an owner, then gives the previous owner(s) p_previous_owner_role:
-- the acting owner, or for the operator every other owner. One statement after the other in one
-- transaction, so the couple always has an owner. A user hands over only what they own: couple.transfer held
-- through another role (neither the policy nor a couple's own role gives it so, but raw SQL could) would
-- otherwise make owners, who hold every permission, without the actor giving anything up.
CREATE OR REPLACE FUNCTION public.transfer_ownership(
    p_couple_id uuid, p_new_owner uuid, p_previous_owner_role text DEFAULT 'partner'
) RETURNS memberships
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'couple.transfer');
    v_target memberships;
    v_result memberships;
BEGIN
    IF v_actor IS NOT NULL
       AND NOT EXISTS (SELECT FROM memberships WHERE couple_id = p_couple_id AND user_id = v_actor AND role = 'owner')
    THEN
        RAISE EXCEPTION 'permission denied: only an owner hands over couple %', p_couple_id
            USING ERRCODE = 'RBDEN', HINT = 'an owner, or the operator, can hand it over';
    END IF;
    PERFORM rbac.require_role(p_couple_id, p_previous_owner_role);
    IF p_previous_owner_role = 'owner' THEN
        RAISE EXCEPTION 'the previous owner needs a role other than owner' USING ERRCODE = 'RBINV';
    END IF;
    -- The memberships it changes, in user id order as delete_couple locks them, before the first update takes
    -- the couple's row: one at a time, each update would hold the couple's row while waiting for the next.
    PERFORM FROM memberships
    WHERE couple_id = p_couple_id
      AND (user_id = p_new_owner OR (role = 'owner' AND (v_actor IS NULL OR user_id = v_actor)))
    ORDER BY user_id FOR UPDATE;
    v_target := rbac.lock_member(p_couple_id, p_new_owner);
    IF v_target.status <> 'active' THEN
        RAISE EXCEPTION 'user % is suspended in couple %; reactivate them first', p_new_owner, p_couple_id
            USING ERRCODE = 'RBINV';
    END IF;
    IF NOT rbac.in_force(v_target.status, v_target.expires_at) THEN
        RAISE EXCEPTION 'the membership of user % in couple % expired; grant them a role first', p_new_owner,
            p_couple_id USING ERRCODE = 'RBINV';
    END IF;
    IF v_actor = p_new_owner THEN
        RAISE EXCEPTION 'user % already owns couple %', p_new_owner, p_couple_id USING ERRCODE = 'RBINV';
    END IF;
    -- An owner's membership never expires.
    UPDATE memberships SET role = 'owner', expires_at = NULL WHERE couple_id = p_couple_id AND user_id = p_new_owner
    RETURNING * INTO v_result;
    UPDATE memberships SET role = p_previous_owner_role
    WHERE couple_id = p_couple_id AND role = 'owner' AND user_id <> p_new_owner
      AND (v_actor IS NULL OR user_id = v_actor);
    PERFORM rbac.enqueue_event('ownership.transferred', p_couple_id, jsonb_build_object(
        'couple_id', p_couple_id, 'new_owner', p_new_owner, 'previous_owner_role', p_previous_owner_role));
    RETURN v_result;
END $$;

-- A couple's name, as it is kept with its spaces at either end trimmed: 1 to 200 characters, no control ones,
-- not all of them blank.
CREATE OR REPLACE FUNCTION rbac.require_couple_name(p_name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_name IS NULL OR length(btrim(p_name)) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'a couple''s name must be 1 to 200 characters' USING ERRCODE = 'RBINV';
    END IF;
    IF rbac.has_control_character(p_name) THEN
        RAISE EXCEPTION 'a couple''s name must not contain control characters (NUL, escape, line breaks, tabs, '
            'bidirectional overrides, ...)' USING ERRCODE = 'RBINV';
    END IF;
    IF rbac.is_blank(p_name) THEN
        RAISE EXCEPTION 'a couple''s name must show something, not only spaces and invisible characters '
            '(zero-width spaces, joiners, fillers, ...)' USING ERRCODE = 'RBINV';
    END IF;
END $$;

-- Creating a couple with its first owner: the operator for anyone, an end user only for themself, and only
-- while they own fewer couples than couple_settings allows (sql/0027_couple_limits.sql). One user's creations
-- wait for each other, so that concurrent ones are counted one by one.
CREATE OR REPLACE FUNCTION public.create_couple(p_name text, p_owner uuid) RETURNS couples
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couple couples;
    v_limit integer;
    v_owned integer;
BEGIN
    IF NOT rbac.is_operator() AND rbac.require_user() IS DISTINCT FROM p_owner THEN
        RAISE EXCEPTION 'permission denied: users can create couples only with themselves as owner'
            USING ERRCODE = 'RBDEN';
    END IF;
    PERFORM rbac.require_user_exists(p_owner);
    PERFORM rbac.require_couple_name(p_name);
    IF NOT rbac.is_operator() THEN
        -- The owner's row written, not only locked, before counting: two creations for one owner count one
        -- after the other, and a REPEATABLE READ or SERIALIZABLE one whose snapshot misses the other's couple
        -- fails to serialize (40001) rather than count without it.
        UPDATE users SET created_at = created_at WHERE id = p_owner;
        v_limit := (SELECT owned_per_user FROM couple_settings);
        v_owned := (SELECT count(*) FROM memberships m WHERE m.user_id = p_owner AND m.role = 'owner');
        IF v_owned >= v_limit THEN
            RAISE EXCEPTION 'user % owns % couples, and a user creates couples only while owning fewer than %',
                p_owner, v_owned, v_limit USING ERRCODE = 'RBQTA',
                HINT = 'delete one no longer needed, or ask the operator to raise the limit (rbac couples limit)';
        END IF;
    END IF;
    INSERT INTO couples (name) VALUES (btrim(p_name)) RETURNING id INTO v_couple.id;
    INSERT INTO memberships (couple_id, user_id, role) VALUES (v_couple.id, p_owner, 'owner');
    SELECT * INTO v_couple FROM couples WHERE id = v_couple.id;
    RETURN v_couple;
END $$;

-- Renaming a couple: a member holding couple.edit, or the operator.
CREATE OR REPLACE FUNCTION public.rename_couple(p_couple_id uuid, p_name text) RETURNS couples
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_couple couples;
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'couple.edit');
    PERFORM rbac.require_couple_name(p_name);
    UPDATE couples SET name = btrim(p_name) WHERE id = p_couple_id RETURNING * INTO v_couple;
    -- Deleted since the permission check.
    IF NOT FOUND THEN
        RAISE EXCEPTION 'couple % does not exist', p_couple_id USING ERRCODE = 'RBNFD';
    END IF;
    RETURN v_couple;
END $$;

-- Deleting a couple and everything of it: memberships, invitations, its own roles and its budget (cascades, and
-- rbac.delete_couple_budget on Citus), and the answers kept for an Idempotency-Key that hold what it was. A member
-- holding couple.delete, or the operator. Its audit log stays, recording the deletion and who made it; caches
-- hear that the couple is gone (notifications.sql).
CREATE OR REPLACE FUNCTION public.delete_couple(p_couple_id uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'couple.delete');
    -- The rows it removes that others change, locked first in the order they take them (an invitation, then a
    -- membership, then a role of the couple's own, then the couple's row), so that the deletion waits for them
    -- instead of deadlocking with them. Before them, its newcomers lock (rbac.lock_newcomers).
    PERFORM rbac.lock_newcomers(p_couple_id, false);
    PERFORM FROM invitations WHERE couple_id = p_couple_id ORDER BY created_at, id FOR UPDATE;
    PERFORM FROM memberships WHERE couple_id = p_couple_id ORDER BY user_id FOR UPDATE;
    PERFORM FROM couple_roles WHERE couple_id = p_couple_id ORDER BY name FOR UPDATE;
    DELETE FROM couples WHERE id = p_couple_id;
    -- Those made under it, and the couple's creation, which names it; sent again, such a request runs again
    -- and finds no couple. An answer without a body names nothing and stays (this deletion's own, sent again,
    -- is answered as it was). One still running keeps no body once the couple is gone (its store's record).
    DELETE FROM idempotent_requests
    WHERE body IS NOT NULL
      AND (couple_id = p_couple_id OR position(convert_to(p_couple_id::text, 'UTF8') IN body) > 0);
END $$;
