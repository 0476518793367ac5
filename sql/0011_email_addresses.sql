-- One rule for an email address wherever one is stored, the rule rbac's Swift side checks (`EmailAddress`):
-- something@domain.tld, at most 320 characters, no whitespace or control characters (Unicode's White_Space
-- and Cc, spelled out so that the rule does not depend on the database's locale), in Unicode's composed form
-- (NFC). The first migrations allowed a domain without a dot, and control characters that would have reached a
-- mail header. rbac.is_email_address (sql/functions/identities.sql) is the same rule for the functions that
-- take an address; these checks hold everything else that writes one.
--
-- NFC because PostgreSQL compares bytes: a decomposed `zoë` would be a second user beside the composed one,
-- and an invitation bound to it would refuse its own invitee. Normalizing needs a database encoded in UTF8.
DO $$
DECLARE
    v_table text;
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'rbac needs a database encoded in UTF8; this one is %', current_setting('server_encoding')
            USING HINT = 'create it with CREATE DATABASE ... ENCODING ''UTF8'' TEMPLATE template0';
    END IF;
    FOREACH v_table IN ARRAY ARRAY['users', 'user_identities', 'invitations'] LOOP
        EXECUTE format('UPDATE %I SET email = normalize(email, NFC) WHERE email IS NOT NFC NORMALIZED', v_table);
        EXECUTE format($f$
            ALTER TABLE %1$I
                ADD CONSTRAINT %2$I CHECK (email IS NFC NORMALIZED),
                DROP CONSTRAINT %3$I,
                ADD CONSTRAINT %3$I CHECK (
                    email ~ '^[^@]+@[^@]+\.[^@]+$'
                    AND email !~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]'
                    AND length(email) <= 320)
            $f$, v_table, v_table || '_email_composed', v_table || '_email_check');
    END LOOP;
END $$;
