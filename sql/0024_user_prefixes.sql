-- A search of one or two characters is found at the start of an address or a name (User.searchesAnywhere). The
-- trigram indexes would offer every user with any word that begins so, which for "co" or "gm" is nearly all of
-- them; these find just those whose address or name begins so, whatever the database's collation.
CREATE INDEX users_email_prefixes ON users (lower(email) text_pattern_ops);
CREATE INDEX users_display_name_prefixes ON users (lower(display_name) text_pattern_ops);
