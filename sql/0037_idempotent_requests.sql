-- Requests sent to `rbac serve` with an Idempotency-Key, by the service key that sent them: the first runs and
-- its answer is kept here, so that one sent again with the same key (a backend retrying after a timeout) gets
-- that answer rather than doing the change twice. Kept for a day (pruned by serve's sweeper).
CREATE TABLE idempotent_requests (
    key_id uuid NOT NULL REFERENCES service_keys (id) ON DELETE CASCADE,
    idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    -- SHA-256 of the method, target, acting user and body: the same key sent with another request is refused.
    fingerprint bytea NOT NULL CHECK (length(fingerprint) = 32),
    -- The instance's hold on a request it is running, renewed while it runs: a request whose instance died
    -- runs again once the hold lapses.
    claim uuid NOT NULL UNIQUE,
    claimed_until timestamptz,
    -- The answer, once there is one: only successes are kept (a refusal changed nothing, so the request may
    -- run again). An answer that held a secret (an invitation's token) is not kept, only that there was one.
    status smallint CHECK (status BETWEEN 200 AND 299),
    body bytea,
    withheld boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_id, idempotency_key),
    CHECK ((status IS NULL) = (claimed_until IS NOT NULL)),
    CHECK (NOT withheld OR body IS NULL)
);
CREATE INDEX idempotent_requests_created_at ON idempotent_requests (created_at);
