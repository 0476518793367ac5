-- A rotated secret may keep signing beside the new one for a while (`rbac webhooks rotate-secret --keep-old`),
-- so that receivers move to the new one without refusing deliveries in between: Standard Webhooks lets one
-- webhook-signature field carry a signature by each. Sealed as secret_box is, under the same endpoint.
ALTER TABLE webhook_endpoints
    ADD COLUMN previous_secret_box bytea,
    ADD COLUMN previous_secret_until timestamptz,
    ADD CONSTRAINT webhook_endpoints_previous_secret
        CHECK ((previous_secret_box IS NULL) = (previous_secret_until IS NULL));
