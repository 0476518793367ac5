-- Invitations. The caller generates the token and passes only its SHA-256; redemption is one conditional
-- UPDATE plus the membership insert in the same transaction, so a token is accepted exactly once.

CREATE OR REPLACE FUNCTION rbac.invitation_status(p_invitation invitations) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_invitation.accepted_at IS NOT NULL THEN 'accepted'
        WHEN p_invitation.revoked_at IS NOT NULL THEN 'revoked'
        WHEN p_invitation.expires_at <= now() THEN 'expired'
        ELSE 'pending'
    END
$$;

CREATE OR REPLACE FUNCTION rbac.require_token_hash(p_token_hash bytea) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_token_hash IS NULL OR length(p_token_hash) <> 32 THEN
        RAISE EXCEPTION 'the token hash must be the 32-byte SHA-256 of the token' USING ERRCODE = 'RBINV';
    END IF;
END $$;

-- Raises the error that says why an invitation cannot be used (or RBNFD when there is none).
CREATE OR REPLACE FUNCTION rbac.raise_unusable(p_invitation invitations) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    CASE rbac.invitation_status(p_invitation)
        WHEN 'accepted' THEN
            RAISE EXCEPTION 'this invitation was already accepted' USING ERRCODE = 'RBUSD';
        WHEN 'revoked' THEN
            RAISE EXCEPTION 'this invitation was revoked' USING ERRCODE = 'RBREV';
        WHEN 'expired' THEN
            RAISE EXCEPTION 'this invitation expired at %', rbac.shown_time(p_invitation.expires_at)
                USING ERRCODE = 'RBEXP';
        ELSE
            RAISE EXCEPTION 'invitation not found' USING ERRCODE = 'RBNFD';
    END CASE;
END $$;

-- Whether p_invitation is pending and bound to user p_user_id's address: an invitation that making them a
-- member of its couple revokes (rbac.memberships_guard), since its link could only answer "already a member".
CREATE OR REPLACE FUNCTION rbac.invites_member(p_invitation invitations, p_user_id uuid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT rbac.invitation_status(p_invitation) = 'pending'
       AND lower(p_invitation.email) = (SELECT lower(u.email) FROM users u WHERE u.id = p_user_id)
$$;

-- Two advisory locks keep a set of rows from growing under a call that locked it and then changes it: a row
-- added after was locked, out of the order the functions take rows in, by whoever acted on it next, and the
-- two deadlocked. The calls take them before the rows they lock (accept_invitation after its user's row, which
-- of the calls that take either lock alone only delete_user waits for, holding nothing else), and none takes
-- both alone.

-- A couple's newcomers lock: shared by the calls that add a member or an invitation (grant_role and
-- accept_invitation through rbac.lock_invitations_to, create_invitation, resend_invitation), taken alone by
-- delete_couple and by delete_couple_role moving a role's holders, so that the members and invitations they
-- locked are all there are until they end.
CREATE OR REPLACE FUNCTION rbac.lock_newcomers(p_couple_id uuid, p_shared boolean) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT rbac.advisory_lock('newcomers ' || p_couple_id, p_shared)
$$;

-- A user's inviting lock: shared by the calls that make an invitation on their authority (create_invitation,
-- resend_invitation), taken alone by those that end the user's memberships and revoke what they made
-- (rbac.lock_invitations_from, delete_user). Without it, an invitation could also be left pending by a member
-- gone, its making having checked the member before they went.
CREATE OR REPLACE FUNCTION rbac.lock_inviting(p_user_id uuid, p_shared boolean) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT rbac.advisory_lock('inviting ' || p_user_id, p_shared)
$$;

-- Locks invitation p_also and the couple's invitations rbac.invites_member names for p_user_id. The functions
-- that make members take these locks before the membership's and the couple's, so that making a member waits
-- for a resend or deletion of one of them instead of deadlocking with it. Oldest first, as delete_couple and
-- delete_user lock invitations. Before that, the couple's newcomers lock, and one person's: two joinings of them
-- wait for each other, for read on either side of a resend, their sets may share no invitation, and one would
-- hold the new one, which the other's memberships_guard revokes, while waiting for the other's membership.
CREATE OR REPLACE FUNCTION rbac.lock_invitations_to(p_couple_id uuid, p_user_id uuid, p_also uuid DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.lock_newcomers(p_couple_id, true);
    PERFORM rbac.advisory_lock('joining ' || p_couple_id || ' ' || p_user_id, false);
    PERFORM FROM invitations i
    WHERE i.couple_id = p_couple_id AND (i.id = p_also OR rbac.invites_member(i, p_user_id))
    ORDER BY i.created_at, i.id FOR UPDATE;
END $$;

-- Locks couple p_couple_id's row, and the pending invitations to user p_user_id's address that
-- rbac.lock_invitations_to did not: made since, they wait to be revoked as the user joins (rbac.memberships_guard).
-- The couple's row first, which create_invitation holds until it commits, so that none is made after these are
-- locked. One made meanwhile may be locked by the deletion of its inviter, which goes on to the couple's row:
-- rather than wait for it holding that row, and deadlock the two, this lets the row go (the block's
-- subtransaction), waits for the invitations alone, as the lock order has them, and tries again.
CREATE OR REPLACE FUNCTION rbac.lock_couple_joined(p_couple_id uuid, p_user_id uuid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_free bigint;
BEGIN
    LOOP
        BEGIN
            PERFORM FROM couples WHERE id = p_couple_id FOR NO KEY UPDATE;
            SELECT count(*) INTO v_free FROM (
                SELECT FROM invitations i WHERE i.couple_id = p_couple_id AND rbac.invites_member(i, p_user_id)
                FOR NO KEY UPDATE SKIP LOCKED) f;
            IF v_free = (SELECT count(*) FROM invitations i
                         WHERE i.couple_id = p_couple_id AND rbac.invites_member(i, p_user_id)) THEN
                RETURN;
            END IF;
            -- Never leaves this function: it only undoes the block.
            RAISE EXCEPTION 'an invitation to the joiner is locked' USING ERRCODE = 'RBWAI';
        EXCEPTION WHEN SQLSTATE 'RBWAI' THEN
            PERFORM FROM invitations i WHERE i.couple_id = p_couple_id AND rbac.invites_member(i, p_user_id)
                ORDER BY i.created_at, i.id FOR NO KEY UPDATE;
        END;
    END LOOP;
END $$;

-- Locks the pending invitations user p_user_id made to the couple, oldest first, as rbac.lock_invitations_to:
-- their membership's end revokes them (rbac.memberships_guard), so the functions that end it take these locks
-- before the membership's and the couple's, as accepting one does; and before them, the user's inviting lock.
CREATE OR REPLACE FUNCTION rbac.lock_invitations_from(p_couple_id uuid, p_user_id uuid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.lock_inviting(p_user_id, false);
    PERFORM FROM invitations i
    WHERE i.couple_id = p_couple_id AND i.invited_by = p_user_id AND rbac.invitation_status(i) = 'pending'
    ORDER BY i.created_at, i.id FOR UPDATE;
END $$;

-- Invites someone to the couple with p_role. The actor needs collaborators.invite and must be allowed to give
-- the role. p_email, when set, binds the invitation to that address (as rbac.stored_email writes it).
-- The limits on a new invitation (sql/0006_invitation_limits.sql): the couple's domains, when it has some (an
-- invitation must then name an address there), and its invitations of the last hour (RBRAT past the setting).
-- Locks the couple's row until the transaction ends, so that concurrent invitations are counted one by one, and
-- writes it (its revision, unchanged), so that a REPEATABLE READ or SERIALIZABLE caller whose snapshot misses
-- another's invitation fails to serialize (40001) rather than count without it: a lock alone would not make it fail.
CREATE OR REPLACE FUNCTION rbac.require_invitation_allowed(p_couple_id uuid, p_email text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_domains text[];
    v_limit integer := (SELECT per_couple_per_hour FROM invitation_settings);
    v_next timestamptz;
BEGIN
    SELECT invite_domains INTO v_domains FROM couples WHERE id = p_couple_id FOR UPDATE;
    -- Deleted since the caller's permission check: the invitation would have nothing to belong to.
    IF NOT FOUND THEN
        RAISE EXCEPTION 'couple % does not exist', p_couple_id USING ERRCODE = 'RBNFD';
    END IF;
    UPDATE couples SET revision = revision WHERE id = p_couple_id;
    IF v_domains <> '{}' AND (p_email IS NULL OR rbac.ascii_domain(split_part(p_email, '@', 2)) <> ALL (v_domains))
    THEN
        -- Each domain as `rbac couples show` lists it: in the letters people type, its ASCII spelling after.
        RAISE EXCEPTION 'couple % invites only addresses at %; name one', p_couple_id,
            (SELECT string_agg(CASE WHEN letters <> d THEN letters || ' (' || d || ')' ELSE d END, ', ' ORDER BY n)
             FROM unnest(v_domains) WITH ORDINALITY AS t(d, n), rbac.unicode_domain(d) AS letters)
            USING ERRCODE = 'RBINV';
    END IF;
    -- At the limit, the next may be made once as many have left the hour as bring it under: when the v_limit-th
    -- newest does (a whole second, so that a client waiting that long is not refused again). The DETAIL
    -- carries the moment for programs (an API's Retry-After).
    v_next := (SELECT to_timestamp(ceil(extract(epoch FROM created_at + interval '1 hour'))) FROM invitations
               WHERE couple_id = p_couple_id AND created_at > now() - interval '1 hour'
               ORDER BY created_at DESC OFFSET v_limit - 1 LIMIT 1);
    IF v_next IS NOT NULL THEN
        RAISE EXCEPTION 'couple % has made % invitations in the last hour, the most allowed; the next may be made at %',
            p_couple_id, v_limit, rbac.shown_time(v_next)
            USING ERRCODE = 'RBRAT', DETAIL = rbac.event_time(v_next),
                  HINT = 'the operator sets the limit: rbac invitations limit --per-hour N';
    END IF;
END $$;

-- Sets the email domains couple p_couple_id may invite (empty: any); the operator's. At most 100: every
-- invitation of the couple is matched against the whole list.
CREATE OR REPLACE FUNCTION public.set_invite_domains(p_couple_id uuid, p_domains text[]) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    c_most constant integer := 100;
    v_domains text[] := ARRAY(SELECT DISTINCT rbac.ascii_domain(btrim(d)) FROM unnest(coalesce(p_domains, '{}')) d
                              ORDER BY 1);
    -- The first given that is not a domain once written in ASCII: labels of letters, digits and hyphens, each
    -- at most 63 characters, at most 253 in all (RFC 1035); nor one that holds a character drawn as nothing once
    -- mapped, which no address may (sql/0040) and which would list as another domain. Named as given, with what
    -- to give instead of a URL, an address, a pattern or a final dot: only the domain itself is matched.
    v_refused text := (
        SELECT coalesce(quote_literal(d), 'NULL')
               || CASE WHEN invisible THEN ', which holds an invisible character (a zero-width joiner, a direction '
                                           'mark, ...)'
                       WHEN t ~ '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?[^/?#:@]'
                           THEN format(', a URL: give its domain alone (%s)',
                                       substring(t from '://(?:[^/?#@]*@)?([^/?#:]*)'))
                       WHEN t ~ '@[^@]+$' THEN format(', which holds an @: give what follows it alone (%s)',
                                                substring(t from '@([^@]*)$'))
                       WHEN t ~ '\*' THEN ', a pattern: name each domain, since each is matched exactly'
                       WHEN t ~ '[^.]\.$' THEN format(', which ends in a dot: give it without (%s)', rtrim(t, '.'))
                       ELSE '' END
        FROM unnest(coalesce(p_domains, '{}')) d, LATERAL btrim(d) t, LATERAL rbac.ascii_domain(t) a,
             LATERAL (SELECT rbac.mapped_domain(t) ~ rbac.invisible_characters()) i(invisible)
        WHERE a IS NULL OR a !~ '^([a-z0-9-]{1,63}\.)+[a-z0-9-]{1,63}$' OR length(a) > 253 OR invisible
        LIMIT 1);
BEGIN
    IF NOT rbac.is_operator() THEN
        RAISE EXCEPTION 'only the operator sets the domains a couple may invite' USING ERRCODE = 'RBDEN';
    END IF;
    PERFORM rbac.require_couple(p_couple_id);
    IF v_refused IS NOT NULL THEN
        RAISE EXCEPTION 'not a domain: %', v_refused USING ERRCODE = 'RBINV';
    END IF;
    IF cardinality(v_domains) > c_most THEN
        RAISE EXCEPTION 'a couple may name at most % domains to invite, not %', c_most, cardinality(v_domains)
            USING ERRCODE = 'RBINV';
    END IF;
    UPDATE couples SET invite_domains = v_domains WHERE id = p_couple_id;
    RETURN v_domains;
END $$;

-- p_membership_expires_at, when set, is when the membership that accepting creates expires.
-- Dropped first: it gained p_membership_expires_at, and an added parameter makes another function.
-- privileges.sql grants it again.
DROP FUNCTION IF EXISTS public.create_invitation(uuid, bytea, text, text, interval);
CREATE OR REPLACE FUNCTION public.create_invitation(
    p_couple_id uuid, p_token_hash bytea, p_role text, p_email text DEFAULT NULL,
    p_expires_in interval DEFAULT interval '7 days', p_membership_expires_at timestamptz DEFAULT NULL
) RETURNS TABLE (invitation_id uuid, expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_actor uuid := rbac.require_permission(p_couple_id, 'collaborators.invite');
    v_email text := rbac.stored_email(p_email);
    v_constraint text;
BEGIN
    PERFORM rbac.lock_inviting(v_actor, true);
    PERFORM rbac.lock_newcomers(p_couple_id, true);
    PERFORM rbac.require_couple(p_couple_id);  -- deleted while this waited: say so, not what else is missing
    -- The inviter's row locked first, before the couple's (rbac.require_invitation_allowed), as delete_user
    -- takes them: a deletion of the inviter waits for the invitation, or this finds them gone. The insert's
    -- foreign key has the last word, below.
    IF v_actor IS NOT NULL AND NOT EXISTS (SELECT FROM users WHERE id = v_actor FOR KEY SHARE) THEN
        RAISE EXCEPTION 'user % does not exist', v_actor USING ERRCODE = 'RBNFD';
    END IF;
    PERFORM rbac.require_token_hash(p_token_hash);
    PERFORM rbac.require_role(p_couple_id, p_role);
    PERFORM rbac.require_expiry(p_role, p_membership_expires_at);
    PERFORM rbac.require_grantable(p_couple_id, v_actor, p_role);
    IF p_expires_in IS NULL OR p_expires_in < interval '1 minute' OR p_expires_in > interval '365 days' THEN
        RAISE EXCEPTION 'an invitation must expire between 1 minute and 365 days from now' USING ERRCODE = 'RBINV';
    END IF;
    IF p_email IS NOT NULL AND v_email IS NULL THEN
        RAISE EXCEPTION 'the address to invite is not an email address: %', rbac.email_refusal(p_email)
            USING ERRCODE = 'RBINV';
    END IF;
    PERFORM rbac.require_invitation_allowed(p_couple_id, v_email);
    -- Its link could only fail them (accept_invitation refuses a member): say so now, not in their inbox.
    IF EXISTS (SELECT FROM users u JOIN memberships m ON m.user_id = u.id
               WHERE lower(u.email) = lower(v_email) AND m.couple_id = p_couple_id) THEN
        RAISE EXCEPTION '% is already a member of this couple', v_email USING ERRCODE = 'RBDUP';
    END IF;
    BEGIN
        RETURN QUERY
            INSERT INTO invitations AS i (couple_id, token_hash, role, email, invited_by, inviter_label,
                                          expires_at, membership_expires_at)
            VALUES (p_couple_id, p_token_hash, p_role, v_email, v_actor,
                    CASE WHEN v_actor IS NULL THEN rbac.actor_label() END, now() + p_expires_in,
                    p_membership_expires_at)
            RETURNING i.id, i.expires_at;
    -- The inviter deleted after all, despite the lock above: seen on Citus under load, in races of an
    -- invitation, an edit of the inviter and their deletion (why the lock let the deletion through is not
    -- known). Said as the check above says it, never as a foreign key's error.
    EXCEPTION WHEN foreign_key_violation THEN
        GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
        IF v_constraint IS DISTINCT FROM 'invitations_invited_by_fkey' THEN
            RAISE;
        END IF;
        RAISE EXCEPTION 'user % does not exist', v_actor USING ERRCODE = 'RBNFD';
    END;
END $$;

-- Whether the member who made p_invitation could make it now (docs/decisions/0014): an invitation is made on its
-- inviter's authority, and one whose inviter is suspended, expired, or holds a role that no longer invites or
-- gives this one lets no one in by it (accept_invitation), and shows so (invitation_preview), until that
-- authority holds again. The operator's invitations have no inviter, and hold.
CREATE OR REPLACE FUNCTION rbac.inviter_may_give(p_invitation invitations) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF p_invitation.invited_by IS NULL THEN
        RETURN true;
    END IF;
    IF NOT rbac.holds_permission(p_invitation.couple_id, p_invitation.invited_by, 'collaborators.invite') THEN
        RETURN false;
    END IF;
    PERFORM rbac.require_grantable(p_invitation.couple_id, p_invitation.invited_by, p_invitation.role);
    RETURN true;
EXCEPTION WHEN SQLSTATE 'RBESC' THEN
    RETURN false;
END $$;

-- Whom an invitation is from, as the invitee is told (the invitation page, the email): the inviter's name, else
-- their address; for one the operator made, or whose inviter is gone, the couple's administrator. Operators'
-- labels are for the logs, not for invitees.
CREATE OR REPLACE FUNCTION rbac.inviter_shown(p_invited_by uuid) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT coalesce((SELECT coalesce(u.display_name, u.email) FROM users u WHERE u.id = p_invited_by),
                    'The couple''s administrator')
$$;

-- What the landing page shows for a token: couple, role, inviter, expiry, status (revoked, as accepting would
-- answer, for a pending one its inviter may no longer give), and for an invitation bound to an address that
-- address masked (o•••@example.com): enough for its owner to know which account to sign in with, not enough to
-- learn it from a forwarded link. Anyone holding the token may look; nothing is consumed. No row for an unknown
-- token.
-- Dropped first: its columns changed once, which CREATE OR REPLACE cannot do. privileges.sql grants it again.
DROP FUNCTION IF EXISTS public.invitation_preview(bytea);
CREATE OR REPLACE FUNCTION public.invitation_preview(p_token_hash bytea)
RETURNS TABLE (couple_id uuid, couple_name text, role text, inviter text, email_hint text,
               expires_at timestamptz, status text, role_description text, membership_expires_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN QUERY
        SELECT i.couple_id, c.name, i.role, rbac.inviter_shown(i.invited_by),
               left(split_part(i.email, '@', 1), 1) || '•••@' || split_part(i.email, '@', 2),
               i.expires_at,
               CASE WHEN s.status = 'pending' AND NOT rbac.inviter_may_give(i) THEN 'revoked' ELSE s.status END,
               coalesce((SELECT r.description FROM roles r WHERE r.name = i.role),
                        (SELECT cr.description FROM couple_roles cr
                         WHERE cr.couple_id = i.couple_id AND cr.name = i.role)),
               i.membership_expires_at
        FROM invitations i
        JOIN couples c ON c.id = i.couple_id
        CROSS JOIN LATERAL (SELECT rbac.invitation_status(i) AS status) s
        WHERE i.token_hash = p_token_hash;
END $$;

-- Accepts an invitation for the acting user (the operator names the user). Exactly once: of any number of
-- concurrent calls, one succeeds and the others see it used.
CREATE OR REPLACE FUNCTION public.accept_invitation(p_token_hash bytea, p_user_id uuid DEFAULT NULL)
RETURNS TABLE (couple_id uuid, user_id uuid, role text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_user uuid;
    v_email text;
    v_invitation invitations;
    -- An end user acting through an identity proves an address only as the provider verified it.
    v_identity user_identities := rbac.jwt_identity();
BEGIN
    PERFORM rbac.require_token_hash(p_token_hash);
    v_user := rbac.subject_user(p_user_id, 'name the user who accepts', 'users accept invitations only for themselves');
    -- Locked, so that a deletion of the user waits for the acceptance, or this finds them gone.
    SELECT email INTO v_email FROM users WHERE id = v_user FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'user % does not exist', v_user USING ERRCODE = 'RBNFD';
    END IF;

    -- With the couple's other invitations to the user's address, which joining revokes.
    SELECT * INTO v_invitation FROM invitations i WHERE i.token_hash = p_token_hash;
    PERFORM rbac.lock_invitations_to(v_invitation.couple_id, v_user, v_invitation.id);
    UPDATE invitations i SET accepted_at = now(), accepted_by = v_user
    WHERE i.token_hash = p_token_hash AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now()
    RETURNING * INTO v_invitation;
    IF NOT FOUND THEN
        SELECT * INTO v_invitation FROM invitations i WHERE i.token_hash = p_token_hash;
        PERFORM rbac.raise_unusable(v_invitation);
    END IF;
    -- An exception below undoes the acceptance above: the function is one statement.
    IF v_identity.user_id IS NOT NULL AND v_invitation.email IS NOT NULL
       AND NOT (v_identity.email_verified AND lower(v_identity.email) = lower(v_invitation.email)) THEN
        RAISE EXCEPTION 'this invitation is for another email address (one your identity provider verified)'
            USING ERRCODE = 'RBEML';
    END IF;
    IF v_identity.user_id IS NULL AND v_invitation.email IS NOT NULL AND lower(v_invitation.email) <> lower(v_email) THEN
        RAISE EXCEPTION 'this invitation is for another email address' USING ERRCODE = 'RBEML';
    END IF;
    IF EXISTS (SELECT 1 FROM memberships m WHERE m.couple_id = v_invitation.couple_id AND m.user_id = v_user) THEN
        RAISE EXCEPTION 'user % is already a member of this couple', v_user USING ERRCODE = 'RBDUP';
    END IF;
    -- Read unlocked: an inviter removed meanwhile revoked it (rbac.memberships_guard) under this row's lock, or
    -- after this acceptance.
    IF NOT rbac.inviter_may_give(v_invitation) THEN
        RAISE EXCEPTION 'this invitation no longer holds: the member who made it may no longer give the % role',
            v_invitation.role USING ERRCODE = 'RBREV', HINT = 'ask a member of the couple for a new invitation';
    END IF;
    IF v_invitation.membership_expires_at <= now() THEN
        RAISE EXCEPTION 'the access this invitation offers ended at %',
            rbac.shown_time(v_invitation.membership_expires_at) USING ERRCODE = 'RBEXP';
    END IF;
    BEGIN
        INSERT INTO memberships (couple_id, user_id, role, expires_at)
        VALUES (v_invitation.couple_id, v_user, v_invitation.role, v_invitation.membership_expires_at);
    EXCEPTION WHEN unique_violation THEN  -- joined since the check above, by a grant or another invitation
        RAISE EXCEPTION 'user % is already a member of this couple', v_user USING ERRCODE = 'RBDUP';
    END;
    RETURN QUERY SELECT v_invitation.couple_id, v_user, v_invitation.role;
END $$;

-- Revokes a pending (or expired) invitation; needs collaborators.invite.
CREATE OR REPLACE FUNCTION public.revoke_invitation(p_couple_id uuid, p_invitation_id uuid) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_invitation invitations;
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.invite');
    UPDATE invitations SET revoked_at = now()
    WHERE couple_id = p_couple_id AND id = p_invitation_id AND accepted_at IS NULL AND revoked_at IS NULL;
    IF NOT FOUND THEN
        SELECT * INTO v_invitation FROM invitations WHERE couple_id = p_couple_id AND id = p_invitation_id;
        PERFORM rbac.raise_unusable(v_invitation);
    END IF;
END $$;

-- A couple's invitations, oldest first (then by id), optionally of one status; needs collaborators.invite. A
-- page follows invitation p_after at p_after_created, when it was made as the page before read; without that,
-- at when p_after was made, which must be one of the couple's (RBNFD).
-- Dropped first (as couple_invitation below): their parameters and columns changed, which CREATE OR REPLACE
-- cannot do.
DROP FUNCTION IF EXISTS public.couple_invitations(uuid, text, integer, uuid);
CREATE OR REPLACE FUNCTION public.couple_invitations(
    p_couple_id uuid, p_status text DEFAULT NULL, p_limit integer DEFAULT 50, p_after uuid DEFAULT NULL,
    p_after_created timestamptz DEFAULT NULL
) RETURNS TABLE (invitation_id uuid, role text, email text, inviter text, created_at timestamptz,
                 expires_at timestamptz, status text, accepted_by uuid, membership_expires_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_after_created timestamptz := p_after_created;
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.invite');
    IF p_status IS NOT NULL AND p_status NOT IN ('pending', 'accepted', 'revoked', 'expired') THEN
        RAISE EXCEPTION 'unknown invitation status "%"; valid: pending, accepted, revoked, expired', p_status
            USING ERRCODE = 'RBINV';
    END IF;
    PERFORM rbac.require_page_size(p_limit);
    IF p_after IS NOT NULL AND v_after_created IS NULL THEN
        SELECT i.created_at INTO v_after_created FROM invitations i WHERE i.couple_id = p_couple_id AND i.id = p_after;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'no invitation % of couple % to page after', p_after, p_couple_id USING ERRCODE = 'RBNFD';
        END IF;
    END IF;
    RETURN QUERY
        SELECT i.id, i.role, i.email, coalesce(u.display_name, u.email, i.inviter_label), i.created_at,
               i.expires_at, rbac.invitation_status(i), i.accepted_by, i.membership_expires_at
        FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
        WHERE i.couple_id = p_couple_id AND (p_after IS NULL OR (i.created_at, i.id) > (v_after_created, p_after))
          AND (p_status IS NULL OR rbac.invitation_status(i) = p_status)
        ORDER BY i.created_at, i.id
        LIMIT p_limit;
END $$;

-- Resending an invitation revokes it and issues a new token for the same role and email in one transaction:
-- if the new one cannot be issued (the actor may not give that role, say), the old one stays as it was. Two
-- resends of one invitation at once: the second waits for the first's row lock, then finds it revoked.
CREATE OR REPLACE FUNCTION public.resend_invitation(
    p_couple_id uuid, p_invitation_id uuid, p_token_hash bytea, p_expires_in interval DEFAULT interval '7 days'
) RETURNS TABLE (invitation_id uuid, expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_old invitations;
BEGIN
    -- Taken again by create_invitation, but needed here before the old invitation's row.
    PERFORM rbac.lock_inviting(rbac.couple_actor(p_couple_id), true);
    PERFORM rbac.lock_newcomers(p_couple_id, true);
    PERFORM public.revoke_invitation(p_couple_id, p_invitation_id);
    SELECT * INTO v_old FROM invitations WHERE couple_id = p_couple_id AND id = p_invitation_id;
    RETURN QUERY SELECT * FROM public.create_invitation(p_couple_id, p_token_hash, v_old.role, v_old.email,
                                                        p_expires_in, v_old.membership_expires_at);
END $$;

-- One invitation of the couple, as couple_invitations lists it (which pages); needs collaborators.invite.
DROP FUNCTION IF EXISTS public.couple_invitation(uuid, uuid);
CREATE OR REPLACE FUNCTION public.couple_invitation(p_couple_id uuid, p_invitation_id uuid)
RETURNS TABLE (invitation_id uuid, role text, email text, inviter text, created_at timestamptz,
               expires_at timestamptz, status text, accepted_by uuid, membership_expires_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.invite');
    RETURN QUERY
        SELECT i.id, i.role, i.email, coalesce(u.display_name, u.email, i.inviter_label), i.created_at,
               i.expires_at, rbac.invitation_status(i), i.accepted_by, i.membership_expires_at
        FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
        WHERE i.couple_id = p_couple_id AND i.id = p_invitation_id;
END $$;
