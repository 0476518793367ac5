-- The record of expiries: memberships and invitations expire by the clock alone (the predicates read
-- expires_at), so nothing writes when they do. The sweeper (rbac sweep, and rbac serve now and then) writes
-- what happened afterwards: an audit entry and an outbox event for each, once.

-- Records one expiry, once: its expiries_recorded row, the couple's audit entry (p_logged) and the outbox event
-- (p_event, with the expiry's instant). False when another sweeper recorded it first (its row is inserted
-- first, and a second insert waits for the first to commit). p_node is the Citus worker holding the couple's
-- audit log: NULL, with nothing of the expiry kept, when that worker cannot be reached. On plain PostgreSQL
-- (p_node NULL) there is no worker to lose, and no subtransaction is opened: past 64 in one transaction they
-- overflow its cache of them, and until it ends other sessions' snapshots look ids up in pg_subtrans.
DROP FUNCTION IF EXISTS rbac.record_expiry(text, uuid, uuid, timestamptz, jsonb, jsonb);
CREATE OR REPLACE FUNCTION rbac.record_expiry(p_node text, p_action text, p_couple uuid, p_subject uuid,
                                              p_expires_at timestamptz, p_event jsonb, p_logged jsonb)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF p_node IS NOT NULL THEN
        BEGIN
            RETURN rbac.record_expiry(NULL, p_action, p_couple, p_subject, p_expires_at, p_event, p_logged);
        EXCEPTION WHEN connection_exception THEN
            RETURN NULL;
        END;
    END IF;
    INSERT INTO expiries_recorded (couple_id, subject_id, expires_at) VALUES (p_couple, p_subject, p_expires_at)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO audit_log (couple_id, actor_id, actor_label, action, before, after)
    VALUES (p_couple, NULL, 'system:expiry', p_action, NULL, p_logged);
    PERFORM rbac.enqueue_event(p_action, p_couple,
                               p_event || jsonb_build_object('expires_at', rbac.event_time(p_expires_at)));
    RETURN true;
END $$;

-- Records up to p_limit memberships and up to p_limit invitations that expired in the last 30 days and were
-- not recorded yet, oldest first: membership.expired / invitation.expired in the couple's audit log and
-- through the outbox, and an expired invitation's sealed token erased. Concurrent sweepers record each expiry
-- once (rbac.record_expiry). On Citus, a couple whose worker cannot be reached is passed over, and so is every
-- other couple on that worker, which is tried once a sweep: the rest are recorded meanwhile, where one such
-- couple would otherwise fail the whole sweep, every time, for as long as the worker is down. The limit counts
-- what was recorded, not what was passed over, so that a down worker's backlog cannot starve the others.
-- Returns how many of each it recorded, how many due ones it passed over because their worker could not be
-- reached (all of them when it recorded fewer than p_limit of each), and those workers (host:port), for the
-- operator to bring back; the operator's.
-- Dropped first while it returns fewer columns: CREATE OR REPLACE cannot add one. privileges.sql grants it
-- again.
DO $$
BEGIN
    IF pg_get_function_result(to_regprocedure('public.sweep_expired(integer)')) NOT LIKE '%workers_unreached%' THEN
        DROP FUNCTION public.sweep_expired(integer);
    END IF;
END $$;
CREATE OR REPLACE FUNCTION public.sweep_expired(p_limit integer DEFAULT 1000)
RETURNS TABLE (memberships_expired integer, invitations_expired integer, expiries_unreached integer,
               workers_unreached text[])
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    -- The worker (host:port) holding the couple's audit log, NULL on plain PostgreSQL.
    v_node text;
    -- The kind being read, and how many of it were recorded.
    v_action text;
    v_count integer;
    v_due record;
    v_recorded boolean;
BEGIN
    IF NOT rbac.is_operator() THEN
        RAISE EXCEPTION 'only the operator sweeps expiries' USING ERRCODE = 'RBDEN';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'a sweep takes 1 to 100000 of each, not %', p_limit USING ERRCODE = 'RBINV';
    END IF;
    expiries_unreached := 0;
    -- The workers found down during this sweep, in the order found.
    workers_unreached := '{}';
    -- One kind after the other: each query's other branch is off, and each stops once p_limit are recorded.
    FOREACH v_action IN ARRAY ARRAY['membership.expired', 'invitation.expired'] LOOP
        v_count := 0;
        FOR v_due IN
            (SELECT m.couple_id, m.user_id AS subject_id, m.expires_at,
                    jsonb_build_object('couple_id', m.couple_id, 'user_id', m.user_id, 'role', m.role,
                                       'expires_at', m.expires_at) AS after
             FROM memberships m
             WHERE v_action = 'membership.expired'
               AND m.expires_at <= now() AND m.expires_at > now() - interval '30 days'
               AND NOT EXISTS (SELECT 1 FROM expiries_recorded r
                               WHERE r.couple_id = m.couple_id AND r.subject_id = m.user_id
                                 AND r.expires_at = m.expires_at)
             ORDER BY m.expires_at, m.couple_id, m.user_id)
            UNION ALL
            (SELECT i.couple_id, i.id, i.expires_at,
                    jsonb_build_object('couple_id', i.couple_id, 'invitation_id', i.id, 'role', i.role,
                                       'email', i.email, 'expires_at', i.expires_at)
             FROM invitations i
             WHERE v_action = 'invitation.expired'
               AND i.accepted_at IS NULL AND i.revoked_at IS NULL
               AND i.expires_at <= now() AND i.expires_at > now() - interval '30 days'
               AND NOT EXISTS (SELECT 1 FROM expiries_recorded r
                               WHERE r.couple_id = i.couple_id AND r.subject_id = i.id
                                 AND r.expires_at = i.expires_at)
             ORDER BY i.expires_at, i.id)
        LOOP
            SELECT host || ':' || port INTO v_node FROM rbac.budget_node(v_due.couple_id);
            IF v_node = ANY (workers_unreached) THEN
                expiries_unreached := expiries_unreached + 1;
                CONTINUE;
            END IF;
            -- The log's entry of an invitation without the address, as rbac.audit_change writes invitations'.
            v_recorded := rbac.record_expiry(v_node, v_action, v_due.couple_id, v_due.subject_id,
                                             v_due.expires_at, v_due.after, v_due.after - 'email');
            IF v_recorded IS NULL THEN
                expiries_unreached := expiries_unreached + 1;
                workers_unreached := workers_unreached || v_node;
            ELSIF v_recorded THEN
                IF v_action = 'invitation.expired' THEN
                    PERFORM rbac.erase_sealed_token(v_due.subject_id);
                END IF;
                v_count := v_count + 1;
                EXIT WHEN v_count = p_limit;
            END IF;
        END LOOP;
        IF v_action = 'membership.expired' THEN
            memberships_expired := v_count;
        ELSE
            invitations_expired := v_count;
        END IF;
    END LOOP;

    -- Past the window, a record is no longer needed to tell recorded from not.
    DELETE FROM expiries_recorded WHERE expires_at < now() - interval '31 days';
    RETURN NEXT;
END $$;
