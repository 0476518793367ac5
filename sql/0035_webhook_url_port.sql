-- An endpoint's port as `rbac webhooks add` admits one (PostgresOutbox.webhookURL), for what raw SQL writes too:
-- none, or 1 to 65535, leading zeros allowed; an IPv6 host's colons, in its brackets, are no port.
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_url_port CHECK (
    coalesce(substring(url from '^https://(?:\[[^]/?#]*\]|[^][/?#:]*):([^/?#]*)'), '')
        ~ '^(|0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))$');
