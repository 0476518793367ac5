-- Which delivery key this database's sealed secrets (webhook secrets, invitation links in the outbox) are
-- sealed under, told without the key: a box sealed under it, which any other key fails to open. The first key
-- to seal anything, or to send, writes it; a worker or command holding another key is refused before it seals
-- or sends anything, so a misconfigured instance pauses instead of sending every message it claims to its death.
-- `rbac delivery-key rotate` re-seals everything, this box included, under a new key.
CREATE TABLE delivery_key_check (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    check_box bytea NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
