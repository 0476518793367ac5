-- Couples (the tenants) and the people who use the service.

CREATE TABLE couples (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email text NOT NULL CHECK (email ~ '^[^@\s]+@[^@\s]+$' AND length(email) <= 320),
    display_name text CHECK (display_name IS NULL OR length(btrim(display_name)) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Email addresses are unique whatever their case.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
