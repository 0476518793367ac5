-- When each service key last authenticated a request, as `rbac serve` records what it saw every
-- --sweep-interval: an operator retiring a key sees whether anything still sends it. Beside service_keys, not
-- in it: recording a use is no change for the operator's log to keep, nor one that makes every instance forget
-- the keys it holds (both follow every write to service_keys).
CREATE TABLE service_key_use (
    key_id uuid PRIMARY KEY REFERENCES service_keys (id) ON DELETE CASCADE,
    last_used_at timestamptz NOT NULL
);
