-- The record of expiries: memberships and invitations expire by the clock alone (the predicates read
-- expires_at), so nothing writes when they do. The sweeper (rbac sweep, and rbac serve now and then) writes
-- what happened afterwards: an audit entry and an outbox event for each, once.

-- Records up to p_limit memberships and up to p_limit invitations that expired in the last 30 days and were
-- not recorded yet: membership.expired / invitation.expired in the couple's audit log and through the outbox,
-- and an expired invitation's sealed token erased. Concurrent sweepers record each expiry once (the first to
-- insert its expiries_recorded row). Returns how many of each it recorded; the operator's.
CREATE OR REPLACE FUNCTION public.sweep_expired(p_limit integer DEFAULT 1000)
RETURNS TABLE (memberships_expired integer, invitations_expired integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_membership record;
    v_invitation invitations;
    v_memberships integer := 0;
    v_invitations integer := 0;
    v_after jsonb;
BEGIN
    IF NOT rbac.is_operator() THEN
        RAISE EXCEPTION 'only the operator sweeps expiries' USING ERRCODE = 'RBDEN';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'a sweep takes 1 to 100000 of each, not %', p_limit USING ERRCODE = 'RBINV';
    END IF;
    FOR v_membership IN
        WITH due AS (
            SELECT m.couple_id, m.user_id, m.role, m.expires_at FROM memberships m
            WHERE m.expires_at <= now() AND m.expires_at > now() - interval '30 days'
              AND NOT EXISTS (SELECT 1 FROM expiries_recorded r
                              WHERE r.couple_id = m.couple_id AND r.subject_id = m.user_id
                                AND r.expires_at = m.expires_at)
            ORDER BY m.expires_at LIMIT p_limit),
        recorded AS (
            INSERT INTO expiries_recorded (couple_id, subject_id, expires_at)
            SELECT couple_id, user_id, expires_at FROM due
            ON CONFLICT DO NOTHING RETURNING couple_id, subject_id, expires_at)
        SELECT due.* FROM due JOIN recorded r
            ON r.couple_id = due.couple_id AND r.subject_id = due.user_id AND r.expires_at = due.expires_at
    LOOP
        v_after := jsonb_build_object('couple_id', v_membership.couple_id, 'user_id', v_membership.user_id,
                                      'role', v_membership.role, 'expires_at', v_membership.expires_at);
        INSERT INTO audit_log (couple_id, actor_id, actor_label, action, before, after)
        VALUES (v_membership.couple_id, NULL, 'system:expiry', 'membership.expired', NULL, v_after);
        PERFORM rbac.enqueue_event(
            'membership.expired', v_membership.couple_id,
            v_after || jsonb_build_object('expires_at', rbac.event_time(v_membership.expires_at)));
        v_memberships := v_memberships + 1;
    END LOOP;

    FOR v_invitation IN
        WITH due AS (
            SELECT i.* FROM invitations i
            WHERE i.accepted_at IS NULL AND i.revoked_at IS NULL
              AND i.expires_at <= now() AND i.expires_at > now() - interval '30 days'
              AND NOT EXISTS (SELECT 1 FROM expiries_recorded r
                              WHERE r.couple_id = i.couple_id AND r.subject_id = i.id AND r.expires_at = i.expires_at)
            ORDER BY i.expires_at LIMIT p_limit),
        recorded AS (
            INSERT INTO expiries_recorded (couple_id, subject_id, expires_at)
            SELECT couple_id, id, expires_at FROM due
            ON CONFLICT DO NOTHING RETURNING couple_id, subject_id)
        SELECT due.* FROM due JOIN recorded r ON r.couple_id = due.couple_id AND r.subject_id = due.id
    LOOP
        v_after := jsonb_build_object('couple_id', v_invitation.couple_id, 'invitation_id', v_invitation.id,
                                      'role', v_invitation.role, 'email', v_invitation.email,
                                      'expires_at', v_invitation.expires_at);
        -- The log's entry without the address, as rbac.audit_change writes invitations'.
        INSERT INTO audit_log (couple_id, actor_id, actor_label, action, before, after)
        VALUES (v_invitation.couple_id, NULL, 'system:expiry', 'invitation.expired', NULL, v_after - 'email');
        PERFORM rbac.erase_sealed_token(v_invitation.id);
        PERFORM rbac.enqueue_event(
            'invitation.expired', v_invitation.couple_id,
            v_after || jsonb_build_object('expires_at', rbac.event_time(v_invitation.expires_at)));
        v_invitations := v_invitations + 1;
    END LOOP;

    -- Past the window, a record is no longer needed to tell recorded from not.
    DELETE FROM expiries_recorded WHERE expires_at < now() - interval '31 days';
    RETURN QUERY SELECT v_memberships, v_invitations;
END $$;
