-- The outbox's writers: what happens to couples, their roles, invitations, memberships and users becomes one
-- message per webhook endpoint that wants it, in the transaction of the change. The worker (rbac deliver, rbac
-- serve) sends them.

-- An instant as the API and the CLI write one (2026-12-11T03:30:45Z: UTC, whole seconds), so that a receiver
-- may compare an event's dates with the API's, string to string; jsonb would write the session's time zone and
-- microseconds.
CREATE OR REPLACE FUNCTION rbac.event_time(p_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- Queues event p_type of couple p_couple_id for every enabled endpoint that receives it. PL/pgSQL, not SQL: it
-- runs inside every write to invitations and memberships, and PL/pgSQL keeps its plan from call to call where a
-- SQL function called this way is planned again each time. The endpoints are locked as they are read, with the
-- lock their foreign key would take: one being removed meanwhile is waited for and then passed over, where the
-- foreign key would fail the write that the event tells of.
CREATE OR REPLACE FUNCTION rbac.enqueue_event(p_type text, p_couple_id uuid, p_payload jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    INSERT INTO outbox (event_type, couple_id, payload, channel, endpoint_id)
    SELECT p_type, p_couple_id, p_payload, 'webhook', e.id
    FROM webhook_endpoints e
    WHERE e.disabled_at IS NULL AND (e.event_types = '{}' OR p_type = ANY (e.event_types))
    FOR KEY SHARE OF e;
END $$;

-- membership.created, membership.updated (role, status or expiry), membership.removed. (membership.expired comes
-- from the sweeper, sql/functions/sweep.sql: nothing writes at the instant of expiry.)
CREATE OR REPLACE FUNCTION rbac.outbox_membership() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_row memberships := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    v_type text := CASE TG_OP WHEN 'INSERT' THEN 'membership.created' WHEN 'DELETE' THEN 'membership.removed'
                              ELSE 'membership.updated' END;
BEGIN
    IF TG_OP = 'UPDATE'
       AND (OLD.role, OLD.status, OLD.expires_at) IS NOT DISTINCT FROM (NEW.role, NEW.status, NEW.expires_at) THEN
        RETURN NULL;
    END IF;
    PERFORM rbac.enqueue_event(v_type, v_row.couple_id, jsonb_build_object(
        'couple_id', v_row.couple_id, 'user_id', v_row.user_id, 'role', v_row.role, 'status', v_row.status,
        'expires_at', rbac.event_time(v_row.expires_at),
        'previous_role', CASE WHEN TG_OP = 'UPDATE' THEN OLD.role END));
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER memberships_outbox AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION rbac.outbox_membership();

-- couple.created, couple.renamed, couple.deleted: the couple itself, for a receiver that keeps its own list of
-- couples. A deleted couple's members each get their membership.removed as well.
CREATE OR REPLACE FUNCTION rbac.outbox_couple() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_row couples := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.name IS NOT DISTINCT FROM NEW.name THEN
        RETURN NULL;
    END IF;
    PERFORM rbac.enqueue_event(
        CASE TG_OP WHEN 'INSERT' THEN 'couple.created' WHEN 'DELETE' THEN 'couple.deleted' ELSE 'couple.renamed' END,
        v_row.id,
        jsonb_build_object('couple_id', v_row.id, 'name', v_row.name,
                           'previous_name', CASE WHEN TG_OP = 'UPDATE' THEN OLD.name END));
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER couples_outbox AFTER INSERT OR UPDATE OF name OR DELETE ON couples
    FOR EACH ROW EXECUTE FUNCTION rbac.outbox_couple();

-- role.created, role.updated, role.deleted: a couple's own role (sql/0008_couple_roles.sql) as it is when the
-- transaction commits, with what it grants, for a receiver that mirrors roles. The triggers wait for the commit and
-- take the role's lock (rbac.couple_role_permissions_changed's, which a row trigger fires before; a write to the
-- role's own row takes none that a write to its permissions waits for) before reading it, so that concurrent writers'
-- events tell the role one after the other, each as its writer left it. One edit writes the role's row and its
-- permissions' rows apart, and is told once: each firing replaces the message an earlier one queued for the role (the
-- transaction's own: written at its start instant, by its id) with the role as it now is, unless that message tells
-- it already, as it does for every firing after the first of a role written whole by one statement, or of a role
-- whose couple is deleted: the outbox is not rewritten once per permission. A role made in the transaction is
-- role.created; one gone at the commit is role.deleted, those of a deleted couple included, and one made in the
-- transaction too (its first firing finds it gone, and leaves no trace of having made it but the message).
CREATE OR REPLACE FUNCTION rbac.outbox_couple_role() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_old jsonb := CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) - 'updated_at' END;
    v_new jsonb := CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) - 'updated_at' END;
    -- The role a row belongs to: couple_roles name it, couple_role_permissions point to it.
    v_old_role jsonb := jsonb_build_object(
        'couple_id', v_old -> 'couple_id', 'role', coalesce(v_old -> 'name', v_old -> 'role'));
    v_new_role jsonb := jsonb_build_object(
        'couple_id', v_new -> 'couple_id', 'role', coalesce(v_new -> 'name', v_new -> 'role'));
    v_role jsonb;
    v_made boolean;
    v_state jsonb;
    v_told_type text;
    v_told jsonb;
    v_type text;
BEGIN
    IF v_old = v_new THEN
        RETURN NULL;
    END IF;
    FOR v_role, v_made IN
        SELECT v_old_role, false WHERE v_old IS NOT NULL
        UNION ALL
        SELECT v_new_role, TG_TABLE_NAME = 'couple_roles'
        WHERE v_new IS NOT NULL AND v_new_role IS DISTINCT FROM v_old_role
    LOOP
        PERFORM rbac.advisory_lock('couple role ' || (v_role ->> 'couple_id') || ' ' || (v_role ->> 'role'), false);
        SELECT jsonb_build_object('couple_id', cr.couple_id, 'role', cr.name, 'description', cr.description,
                                  'permissions', to_jsonb(rbac.couple_role_permissions(cr.couple_id, cr.name)))
        INTO v_state
        FROM couple_roles cr WHERE cr.couple_id = (v_role ->> 'couple_id')::uuid AND cr.name = v_role ->> 'role';
        -- The messages told are one per endpoint that wants them, all alike.
        SELECT o.event_type, o.payload INTO v_told_type, v_told
        FROM outbox o
        WHERE o.created_at = now() AND o.xmin = pg_current_xact_id()::xid
          AND o.event_type IN ('role.created', 'role.updated', 'role.deleted')
          AND o.couple_id = (v_role ->> 'couple_id')::uuid AND o.payload ->> 'role' = v_role ->> 'role'
        LIMIT 1;
        v_type := CASE WHEN v_state IS NULL THEN 'role.deleted'
                       WHEN coalesce(v_told_type = 'role.created', v_made) THEN 'role.created'
                       ELSE 'role.updated' END;
        v_state := coalesce(v_state, v_role);
        CONTINUE WHEN v_told_type = v_type AND v_told = v_state;
        DELETE FROM outbox o
        WHERE o.created_at = now() AND o.xmin = pg_current_xact_id()::xid AND o.event_type = v_told_type
          AND o.couple_id = (v_role ->> 'couple_id')::uuid AND o.payload ->> 'role' = v_role ->> 'role';
        PERFORM rbac.enqueue_event(v_type, (v_role ->> 'couple_id')::uuid, v_state);
    END LOOP;
    RETURN NULL;
END $$;

-- Constraint triggers, the only ones that wait for the commit, have no CREATE OR REPLACE.
DROP TRIGGER IF EXISTS couple_roles_outbox ON couple_roles;
CREATE CONSTRAINT TRIGGER couple_roles_outbox AFTER INSERT OR UPDATE OR DELETE ON couple_roles
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rbac.outbox_couple_role();
DROP TRIGGER IF EXISTS couple_role_permissions_outbox ON couple_role_permissions;
CREATE CONSTRAINT TRIGGER couple_role_permissions_outbox
    AFTER INSERT OR UPDATE OR DELETE ON couple_role_permissions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rbac.outbox_couple_role();

-- user.created (a first sign-in, rbac users add, a couple made for a new owner) and user.updated (an address or
-- display name changed), with both as they are, for a receiver that shows who is who. user.deleted, written
-- after the membership.removed of each of the user's couples (the foreign keys' cascades run first), for a
-- receiver that keeps data of its own about the person. The id alone: nothing that named them, and their
-- user.created and user.updated messages, sent or not, go from the outbox with them.
CREATE OR REPLACE FUNCTION rbac.outbox_user() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM outbox WHERE event_type IN ('user.created', 'user.updated')
                             AND payload ->> 'user_id' = OLD.id::text;
        PERFORM rbac.enqueue_event('user.deleted', NULL, jsonb_build_object('user_id', OLD.id));
    ELSIF TG_OP = 'INSERT' OR (OLD.email, OLD.display_name) IS DISTINCT FROM (NEW.email, NEW.display_name) THEN
        PERFORM rbac.enqueue_event(CASE TG_OP WHEN 'INSERT' THEN 'user.created' ELSE 'user.updated' END, NULL,
                                   jsonb_build_object('user_id', NEW.id, 'email', NEW.email,
                                                      'display_name', NEW.display_name));
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER users_outbox AFTER INSERT OR UPDATE OF email, display_name OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION rbac.outbox_user();

-- Erases the sealed token of invitation p_invitation_id from every message still holding it: once it is
-- accepted, revoked, expired or deleted, no message may carry a usable link to it. Its email, if not sent yet,
-- never will be: it is dead here, saying why, where the worker would find no link and could not.
CREATE OR REPLACE FUNCTION rbac.erase_sealed_token(p_invitation_id uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    UPDATE outbox
    SET token_box = NULL,
        status = CASE WHEN channel = 'email' AND status = 'pending' THEN 'dead' ELSE status END,
        last_error = CASE WHEN channel = 'email' AND status = 'pending'
                          THEN 'not sent: the invitation was accepted, revoked, expired or deleted first'
                          ELSE last_error END
    WHERE token_box IS NOT NULL AND payload ->> 'invitation_id' = p_invitation_id::text;
END $$;

-- invitation.created, invitation.accepted, invitation.revoked; and for an invitation bound to an address, the
-- email that carries its link. Once an invitation is accepted, revoked or deleted (with its couple), its sealed
-- token goes from every message still holding it. The email names no inviter: the worker reads who it is from
-- when it sends it (rbac.inviter_shown), as they are then, and the outbox does not keep it.
CREATE OR REPLACE FUNCTION rbac.outbox_invitation() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_type text;
    v_payload jsonb;
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM rbac.erase_sealed_token(OLD.id);
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        v_type := 'invitation.created';
    ELSIF OLD.accepted_at IS NULL AND NEW.accepted_at IS NOT NULL THEN
        v_type := 'invitation.accepted';
    ELSIF OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL THEN
        v_type := 'invitation.revoked';
    ELSE
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        PERFORM rbac.erase_sealed_token(NEW.id);
    END IF;
    v_payload := jsonb_build_object(
        'couple_id', NEW.couple_id, 'invitation_id', NEW.id, 'role', NEW.role, 'email', NEW.email,
        'expires_at', rbac.event_time(NEW.expires_at),
        'membership_expires_at', rbac.event_time(NEW.membership_expires_at),
        'accepted_by', NEW.accepted_by);
    PERFORM rbac.enqueue_event(v_type, NEW.couple_id, v_payload);
    IF TG_OP = 'INSERT' AND NEW.email IS NOT NULL THEN
        INSERT INTO outbox (event_type, couple_id, payload, channel)
        SELECT v_type, NEW.couple_id,
               v_payload || jsonb_build_object(
                   'couple_name', c.name, 'expires_epoch', extract(epoch FROM NEW.expires_at)::bigint),
               'email'
        FROM couples c
        WHERE c.id = NEW.couple_id;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER invitations_outbox AFTER INSERT OR UPDATE OR DELETE ON invitations
    FOR EACH ROW EXECUTE FUNCTION rbac.outbox_invitation();
