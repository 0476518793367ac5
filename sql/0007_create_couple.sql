-- Creating a couple with its first owner: the operator for anyone, an end user only for themself.
CREATE FUNCTION public.create_couple(p_name text, p_owner uuid) RETURNS couples
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_couple couples;
BEGIN
    IF NOT rbac.is_operator() AND rbac.require_user() IS DISTINCT FROM p_owner THEN
        RAISE EXCEPTION 'permission denied: users can create couples only with themselves as owner'
            USING ERRCODE = 'RBDEN';
    END IF;
    PERFORM rbac.require_user_exists(p_owner);
    IF p_name IS NULL OR length(btrim(p_name)) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'a couple''s name must be 1 to 200 characters' USING ERRCODE = 'RBINV';
    END IF;
    INSERT INTO couples (name) VALUES (btrim(p_name)) RETURNING id INTO v_couple.id;
    INSERT INTO memberships (couple_id, user_id, role) VALUES (v_couple.id, p_owner, 'owner');
    SELECT * INTO v_couple FROM couples WHERE id = v_couple.id;
    RETURN v_couple;
END $$;

REVOKE EXECUTE ON FUNCTION public.create_couple(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.create_couple(text, uuid) TO rbac_app;
