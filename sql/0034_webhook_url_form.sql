-- An endpoint's URL as `rbac webhooks add` admits one (PostgresOutbox.webhookURL), for what raw SQL writes too:
-- printable ASCII, a host, no user or password (the URL is listed and audited as it is, and would show them)
-- and no #fragment, which a request never sends.
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_url_form CHECK (
    url ~ '^[!-~]+$' AND url ~ '^https://[^/?#@:]' AND url !~ '^https://[^/?#]*@' AND strpos(url, '#') = 0);
