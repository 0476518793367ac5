-- Email addresses refuse what mail reads only inside quotes or a bracketed domain (" ( ) , : ; < > [ \ ]) and
-- dots that begin or end the name or the domain or follow another dot, as Swift's `EmailAddress` and
-- rbac.email_shape_refusal do. A header `To: <a>,<b@example.com>` names two recipients where rbac stored one
-- address, and `p..x@example.com` is no address a mail server delivers to.
--
-- An address that already breaks the rule stops the migration with the rows to look at, as in sql/0012: only a
-- person can tell whom it should have named.
DO $$
DECLARE
    v_table text;
    v_finding text;
    v_count bigint;
    v_rule constant text := 'email !~ ''["(),:;<>[\\\]]'' AND email ~ ''^[^.@]+(\.[^.@]+)*@[^.@]+(\.[^.@]+)+$''';
BEGIN
    FOREACH v_table IN ARRAY ARRAY['users', 'user_identities', 'invitations'] LOOP
        v_finding := format('SELECT * FROM %I WHERE NOT (%s)', v_table, v_rule);
        EXECUTE format('SELECT count(*) FROM (%s) t', v_finding) INTO v_count;
        IF v_count > 0 THEN
            RAISE EXCEPTION '% row(s) of % hold an email address that needs quotes or has a misplaced dot',
                v_count, v_table
                USING HINT = format('find them with %s; correct or delete them, then migrate again', v_finding);
        END IF;
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%s)', v_table, v_table || '_email_unquoted', v_rule);
    END LOOP;
END $$;
