-- One invitation bound to an address, as the operator makes it: with the outbox on, an invitation.created row
-- for the webhook endpoint and one email.
\set c random(1, 1000)
SELECT create_invitation((SELECT id FROM bench_couples WHERE n = :c), sha256(random()::text::bytea), 'viewer',
                         'guest' || (random() * 1e9)::bigint || '@example.com');
