-- Email addresses are kept in Unicode's composed form (NFC), as rbac's Swift side has always stored them.
-- PostgreSQL compares bytes: a decomposed `zoë` would be a second user beside the composed one, and an
-- invitation bound to it would refuse its own invitee. The functions that take an address normalize it; these
-- checks hold everything else that writes one. Normalizing needs a database encoded in UTF8.
DO $$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'rbac needs a database encoded in UTF8; this one is %', current_setting('server_encoding')
            USING HINT = 'create it with CREATE DATABASE ... ENCODING ''UTF8'' TEMPLATE template0';
    END IF;
END $$;

UPDATE users SET email = normalize(email, NFC) WHERE email IS NOT NFC NORMALIZED;
UPDATE user_identities SET email = normalize(email, NFC) WHERE email IS NOT NFC NORMALIZED;
UPDATE invitations SET email = normalize(email, NFC) WHERE email IS NOT NFC NORMALIZED;
ALTER TABLE users ADD CONSTRAINT users_email_composed CHECK (email IS NFC NORMALIZED);
ALTER TABLE user_identities ADD CONSTRAINT user_identities_email_composed CHECK (email IS NFC NORMALIZED);
ALTER TABLE invitations ADD CONSTRAINT invitations_email_composed CHECK (email IS NFC NORMALIZED);
