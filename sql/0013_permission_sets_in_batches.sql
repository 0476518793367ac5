-- Many (couple, user) permission sets in one statement, for checks that arrive together: the n-th row answers
-- the n-th pair. All rows are read from one snapshot, like user_permission_set's two reads: revision is NULL
-- for an unknown couple; permissions are empty unless the user is an active member. It replaces
-- user_permission_set, whose one pair is a batch of one.
CREATE FUNCTION public.user_permission_sets(p_couple_ids uuid[], p_user_ids uuid[])
RETURNS TABLE (revision bigint, permissions text[])
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF cardinality(p_couple_ids) IS DISTINCT FROM cardinality(p_user_ids) THEN
        RAISE EXCEPTION 'user_permission_sets needs one user per couple, not % couples and % users',
            cardinality(p_couple_ids), cardinality(p_user_ids) USING ERRCODE = 'RBINV';
    END IF;
    RETURN QUERY
    SELECT c.revision,
           coalesce((SELECT array_agg(rp.permission ORDER BY rp.permission)
                     FROM memberships m JOIN role_permissions rp ON rp.role = m.role
                     WHERE m.couple_id = pair.couple_id AND m.user_id = pair.user_id AND m.status = 'active'),
                    '{}')
    FROM unnest(p_couple_ids, p_user_ids) WITH ORDINALITY AS pair(couple_id, user_id, n)
    LEFT JOIN couples c ON c.id = pair.couple_id
    ORDER BY pair.n;
END $$;

REVOKE EXECUTE ON FUNCTION public.user_permission_sets(uuid[], uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.user_permission_sets(uuid[], uuid[]) TO rbac_operator;

DROP FUNCTION public.user_permission_set(uuid, uuid);
