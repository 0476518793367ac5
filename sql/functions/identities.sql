-- Signing in: the user of a verified token's identity, made on its first sign-in.

-- Why p_email is no email address as rbac stores one, in the words of Swift's `EmailAddress(validating:)` and
-- in its order; NULL when it is one. The same rule as the checks on every email column (sql/0012, 0040 and 0041).
-- Composed form is not part of it: the callers normalize first. The spaces are Unicode's White_Space characters
-- that are not control characters.
CREATE OR REPLACE FUNCTION rbac.email_shape_refusal(p_email text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE
        WHEN length(p_email) > 320 THEN 'it is longer than 320 characters'
        WHEN rbac.has_control_character(p_email) THEN 'it holds a control character or a bidirectional override'
        WHEN p_email ~ rbac.invisible_characters()
            THEN 'it holds an invisible character (a zero-width space or joiner, a direction mark, ...)'
        WHEN p_email ~ '^[^<>]*<[^<>]+>$'
            THEN format('it wraps the address in <> (give %s alone)', substring(p_email from '<([^<>]+)>$'))
        WHEN p_email ~ '^[Mm][Aa][Ii][Ll][Tt][Oo]:.'
            THEN format('it begins with mailto: (give %s alone)', substr(p_email, 8))
        WHEN p_email ~ '[\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]' THEN 'it holds a space'
        WHEN p_email !~ '^[^@]*@[^@]*$' THEN 'it needs one @, between a name and a domain'
        WHEN p_email ~ '["(),:;<>[\\\]]'
            THEN 'it holds one of " ( ) , : ; < > [ \ ] (rbac takes no quoted name or bracketed domain)'
        WHEN p_email !~ '^[^@]+@[^@]+\.[^@]+$'
            THEN 'it needs a name before its @ and a dot inside its domain (name@example.com)'
        WHEN p_email !~ '^[^.@]+(\.[^.@]+)*@[^.@]+(\.[^.@]+)+$'
            THEN 'a dot cannot begin or end its name or its domain, nor follow another dot'
    END
$$;

-- Whether p_email is an email address as rbac stores one.
CREATE OR REPLACE FUNCTION rbac.is_email_address(p_email text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT rbac.email_shape_refusal(p_email) IS NULL
$$;

-- p_email with its domain mapped as IDNA maps it (rbac.mapped_domain) and each label written `xn--…` in the
-- letters it stands for (rbac.unicode_domain); NULL when such a label does not stand for a label IDNA takes. Text
-- without exactly one @ has no domain and comes back as it is.
CREATE OR REPLACE FUNCTION rbac.email_in_letters(p_email text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN p_email ~ '^[^@]*@[^@]*$'
                THEN split_part(p_email, '@', 1) || '@'
                     || rbac.unicode_domain(rbac.mapped_domain(split_part(p_email, '@', 2)))
                ELSE p_email END
$$;

-- p_email as rbac stores an address, or NULL when it is none (rbac.email_refusal says why): in its composed form
-- (NFC), with its domain mapped and in letters (rbac.email_in_letters), so that `ann@xn--bcher-kva.example`,
-- `ann@ｂücher。example` and `ann@bücher.example` are one address. Swift's `EmailAddress` does the same.
CREATE OR REPLACE FUNCTION rbac.stored_email(p_email text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT email FROM normalize(rbac.email_in_letters(p_email), NFC) AS email WHERE rbac.is_email_address(email)
$$;

-- Why rbac.stored_email finds no address in p_email, for a refusal's message; NULL when it finds one.
CREATE OR REPLACE FUNCTION rbac.email_refusal(p_email text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN letters IS NULL
                    THEN 'a label of its domain written xn--… is not the Punycode of a label IDNA takes'
                ELSE rbac.email_shape_refusal(normalize(letters, NFC)) END
    FROM rbac.email_in_letters(p_email) AS letters
$$;

-- The user of identity (p_issuer, p_subject), and whether this call created it. The operator alone calls it,
-- with what a token it verified says: the address, whether the provider verified it, a display name.
--   * a known identity: its user; the address and its verification are updated to the token's.
--   * a development token (no issuer, a UUID subject): the user with that id, created when missing.
--   * an unknown identity whose verified address is an existing user's: linked to that user. An unverified
--     address that is taken is refused (RBDUP): whoever controls a provider account must not take over a user.
--   * otherwise a new user with the token's address (RBINV without a usable one) and the identity.
-- Concurrent first sign-ins of one identity make one user: the one that loses the race reads the winner's.
CREATE OR REPLACE FUNCTION public.sign_in(p_issuer text, p_subject text, p_email text, p_email_verified boolean,
                                          p_name text)
RETURNS TABLE (user_id uuid, created boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    v_user uuid;
    v_created boolean;
    v_constraint text;
    v_email text := rbac.stored_email(btrim(p_email));
    v_name text := CASE WHEN NOT rbac.has_control_character(p_name) AND NOT rbac.is_blank(p_name)
                             AND length(btrim(p_name)) BETWEEN 1 AND 200
                        THEN btrim(p_name) END;
    v_development boolean := p_issuer = ''
        AND p_subject ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
BEGIN
    IF NOT rbac.is_operator() THEN
        RAISE EXCEPTION 'only the operator signs users in' USING ERRCODE = 'RBDEN';
    END IF;
    IF p_issuer IS NULL OR length(p_issuer) > 500 OR p_subject IS NULL OR length(p_subject) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'an identity needs an issuer (at most 500 characters) and a subject (1 to 255)'
            USING ERRCODE = 'RBINV';
    END IF;
    FOR v_attempt IN 1..3 LOOP
        IF v_development THEN
            SELECT u.id INTO v_user FROM users u WHERE u.id = p_subject::uuid;
        ELSE
            SELECT i.user_id INTO v_user FROM user_identities i
            WHERE i.issuer = p_issuer AND i.subject = p_subject;
        END IF;
        IF v_user IS NOT NULL THEN
            UPDATE user_identities i SET email = v_email, email_verified = coalesce(p_email_verified, false)
            WHERE i.issuer = p_issuer AND i.subject = p_subject
              AND (i.email, i.email_verified) IS DISTINCT FROM (v_email, coalesce(p_email_verified, false));
            RETURN QUERY SELECT v_user, false;
            RETURN;
        END IF;
        IF v_email IS NULL THEN
            RAISE EXCEPTION 'the identity provider gave no usable email address, which a new user needs%',
                coalesce(': ' || rbac.email_refusal(btrim(p_email)), '') USING ERRCODE = 'RBINV';
        END IF;
        BEGIN
            -- Locked, so that a deletion of the user waits for the identity added, or this finds them gone.
            SELECT u.id INTO v_user FROM users u WHERE lower(u.email) = lower(v_email) FOR KEY SHARE;
            IF v_user IS NOT NULL AND NOT coalesce(p_email_verified, false) THEN
                RAISE EXCEPTION 'a user with this email address exists; sign in with a provider that verified it'
                    USING ERRCODE = 'RBDUP';
            END IF;
            v_created := v_user IS NULL;
            IF v_created THEN
                INSERT INTO users (id, email, display_name)
                VALUES (CASE WHEN v_development THEN p_subject::uuid ELSE gen_random_uuid() END, v_email, v_name)
                RETURNING id INTO v_user;
            END IF;
            IF NOT v_development THEN
                INSERT INTO user_identities (issuer, subject, user_id, email, email_verified)
                VALUES (p_issuer, p_subject, v_user, v_email, coalesce(p_email_verified, false));
            END IF;
            RETURN QUERY SELECT v_user, v_created;
            RETURN;
        EXCEPTION
            WHEN unique_violation THEN
                -- A concurrent sign-in made the user or the identity first: read what it made.
                v_user := NULL;
            WHEN foreign_key_violation THEN
                -- The user found by the address deleted after all, despite the lock (as create_invitation has
                -- seen on Citus): look again, as a sign-in a moment later would.
                GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
                IF v_constraint IS DISTINCT FROM 'user_identities_user_id_fkey' THEN
                    RAISE;
                END IF;
                v_user := NULL;
        END;
    END LOOP;
    RAISE EXCEPTION 'could not sign in %: concurrent changes kept conflicting', p_subject USING ERRCODE = '40001';
END $$;
