-- API keys of backend services (not tenant data): only the SHA-256 of each key is stored.
CREATE TABLE service_keys (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 100),
    key_hash bytea NOT NULL CHECK (length(key_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE UNIQUE INDEX service_keys_key_hash_key ON service_keys (key_hash);
REVOKE ALL ON service_keys FROM PUBLIC;
