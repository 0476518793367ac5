-- A search of users by part of their address or name (`rbac users list --search`, `GET /v1/users?search=`)
-- read every user when few matched: trigram indexes find those few. pg_trgm ships with PostgreSQL and is a
-- trusted extension. A database without it gets it in a schema of its own, `extensions`, so that `public` and
-- `rbac` hold only what sql/functions defines; one with it keeps it where it is.
DO $$
DECLARE
    v_schema name;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        CREATE SCHEMA IF NOT EXISTS extensions;
        CREATE EXTENSION pg_trgm SCHEMA extensions;
    END IF;
    SELECT extnamespace::regnamespace::name INTO v_schema FROM pg_extension WHERE extname = 'pg_trgm';
    EXECUTE format('CREATE INDEX users_email_trigrams ON users USING gin (lower(email) %I.gin_trgm_ops)', v_schema);
    EXECUTE format('CREATE INDEX users_display_name_trigrams ON users USING gin (lower(display_name) %I.gin_trgm_ops)',
                   v_schema);
END $$;
