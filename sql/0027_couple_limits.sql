-- A limit on the couples a user makes for themselves, so that one account (or a direct client's token) cannot
-- fill the database, and every webhook subscribed to couple.created, with couples: a user who owns this many
-- may create no more (sql/functions/memberships.sql, create_couple). The operator's setting; the operator's own
-- creations are not held to it.
CREATE TABLE couple_settings (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    owned_per_user integer NOT NULL DEFAULT 20 CHECK (owned_per_user BETWEEN 1 AND 100000)
);
INSERT INTO couple_settings DEFAULT VALUES;
