-- Addresses are unique and compared whatever their case (lower(email)), and lower() changes letters beyond
-- ASCII only under a locale that knows them: under LC_CTYPE C, `ZOË@example.com` and `zoë@example.com` would
-- be two users, while rbac's Swift side takes them as one. Such a database is refused, as sql/0011 refuses one
-- not encoded in UTF8; all that one `rbac migrate` applies is undone with it.
DO $$
BEGIN
    IF lower(U&'\00C9') <> U&'\00E9' THEN
        RAISE EXCEPTION 'rbac needs a database whose locale knows the case of letters beyond ASCII; this one''s '
                        'LC_CTYPE is %', current_setting('lc_ctype')
            USING HINT = 'create it with a UTF-8 locale: CREATE DATABASE ... LOCALE ''C.UTF-8'' TEMPLATE template0';
    END IF;
END $$;
