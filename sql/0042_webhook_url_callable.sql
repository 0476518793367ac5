-- An endpoint's URL as `rbac webhooks add` admits one (PostgresOutbox.webhookURL), for what raw SQL writes too:
-- a host with no empty label (a dot that begins it or follows another), which no name server resolves, and no %
-- escape, which libcurl decodes there (a%2E%2Eb is a..b); and two hexadecimal digits after each %, without which a
-- server refuses or misreads the URL. libcurl calls each of these all the same, and each message would be retried
-- for more than a day before it died.
--
-- An endpoint that already breaks the rule stops the migration with the rows to look at, as in sql/0041: only its
-- owner knows the URL that was meant.
DO $$
DECLARE
    v_rule constant text := 'url !~ ''^https://(\.|[^/?#]*(\.\.|%))'' AND url !~ ''%(?![0-9A-Fa-f]{2})''';
    v_finding constant text := format('SELECT id, url FROM webhook_endpoints WHERE NOT (%s)', v_rule);
    v_count bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (%s) t', v_finding) INTO v_count;
    IF v_count > 0 THEN
        RAISE EXCEPTION '% webhook endpoint(s) have a URL with an empty host label, a %% in its host, or a %% '
            'without two hexadecimal digits', v_count
            USING HINT = format('find them with %s; correct or delete them, then migrate again', v_finding);
    END IF;
    EXECUTE format('ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_url_callable CHECK (%s)', v_rule);
END $$;
