-- Resending an invitation revokes it and issues a new token for the same role and email in one transaction:
-- if the new one cannot be issued (the actor may not give that role, say), the old one stays as it was. Two
-- resends of one invitation at once: the second waits for the first's row lock, then finds it revoked.
CREATE FUNCTION public.resend_invitation(
    p_couple_id uuid, p_invitation_id uuid, p_token_hash bytea, p_expires_in interval DEFAULT interval '7 days'
) RETURNS TABLE (invitation_id uuid, expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_old invitations;
BEGIN
    PERFORM public.revoke_invitation(p_couple_id, p_invitation_id);
    SELECT * INTO v_old FROM invitations WHERE couple_id = p_couple_id AND id = p_invitation_id;
    RETURN QUERY SELECT * FROM public.create_invitation(p_couple_id, p_token_hash, v_old.role, v_old.email,
                                                        p_expires_in);
END $$;

-- One invitation of the couple, as couple_invitations lists it (which pages); needs collaborators.invite.
CREATE FUNCTION public.couple_invitation(p_couple_id uuid, p_invitation_id uuid)
RETURNS TABLE (invitation_id uuid, role text, email text, inviter text, created_at timestamptz,
               expires_at timestamptz, status text, accepted_by uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    PERFORM rbac.require_permission(p_couple_id, 'collaborators.invite');
    RETURN QUERY
        SELECT i.id, i.role, i.email, coalesce(u.display_name, u.email, i.inviter_label), i.created_at,
               i.expires_at, rbac.invitation_status(i), i.accepted_by
        FROM invitations i LEFT JOIN users u ON u.id = i.invited_by
        WHERE i.couple_id = p_couple_id AND i.id = p_invitation_id;
END $$;

REVOKE EXECUTE ON FUNCTION public.resend_invitation(uuid, uuid, bytea, interval),
    public.couple_invitation(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.resend_invitation(uuid, uuid, bytea, interval),
    public.couple_invitation(uuid, uuid) TO rbac_app;
