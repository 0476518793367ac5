-- 1,000 couples with an owner each, numbered for pgbench; the hourly invitation limit out of the way.
UPDATE invitation_settings SET per_couple_per_hour = 100000;
CREATE TABLE bench_couples (n integer PRIMARY KEY, id uuid NOT NULL);
WITH u AS (
    INSERT INTO users (email) SELECT 'owner' || i || '@example.com' FROM generate_series(1, 1000) i RETURNING id, email
), c AS (
    INSERT INTO couples (name) SELECT 'Couple ' || substring(email FROM 'owner(\d+)@') FROM u RETURNING id, name
)
INSERT INTO bench_couples SELECT substring(c.name FROM '\d+')::int, c.id FROM c;
INSERT INTO memberships (couple_id, user_id, role)
SELECT b.id, u.id, 'owner' FROM bench_couples b JOIN users u ON u.email = 'owner' || b.n || '@example.com';
