-- A user's accounts at identity providers: a verified token's (iss, sub). Users are found by identity; `sub` is
-- whatever the provider makes it (auth0|64f..., user_2abc..., a UUID). The issuer is '' for tokens without
-- `iss` (development tokens signed with the shared secret).
CREATE TABLE user_identities (
    issuer text NOT NULL CHECK (length(issuer) <= 500),
    subject text NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The address the provider last gave, and whether it said it verified it: an invitation bound to an
    -- address is accepted through an identity only when this matches and is verified.
    email text CHECK (email IS NULL OR length(email) <= 320),
    email_verified boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user_id ON user_identities (user_id);
