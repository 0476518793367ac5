-- The operator's settings are one row each, which the definitions now keep (rbac.keep_setting); one that raw SQL
-- deleted before comes back with its default, as the migration that made it inserted it.
INSERT INTO invitation_settings DEFAULT VALUES ON CONFLICT DO NOTHING;
INSERT INTO couple_settings DEFAULT VALUES ON CONFLICT DO NOTHING;
