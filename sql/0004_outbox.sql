-- Where events go: webhook endpoints, whose signing secrets are sealed (AES-256-GCM) under the delivery key,
-- which the database never sees.
CREATE TABLE webhook_endpoints (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    url text NOT NULL CHECK (url ~ '^https://[^\s]+$' AND length(url) <= 2000),
    -- The event types it receives; empty for every one.
    event_types text[] NOT NULL DEFAULT '{}',
    secret_box bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Set when it answered 410 Gone, or an operator removed it: nothing more is sent.
    disabled_at timestamptz
);

-- The transactional outbox: one row per message to deliver, written in the transaction of the change it tells
-- of (by triggers, so raw SQL writes them too). Its id is the message's, for receivers to deduplicate on.
CREATE TABLE outbox (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_type text NOT NULL,
    couple_id uuid,
    payload jsonb NOT NULL,
    channel text NOT NULL CHECK (channel IN ('webhook')),
    endpoint_id uuid REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
    last_error text CHECK (length(last_error) <= 1000),
    delivered_at timestamptz
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
