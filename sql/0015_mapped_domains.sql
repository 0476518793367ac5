-- An address is stored with its domain as IDNA maps what people type (rbac.mapped_domain): no compatibility
-- forms (`ｂücher．example` is stored `bücher.example`), no ideographic full stops, none of the characters IDNA
-- ignores. Each spelling reaches one mailbox; with one of them stored, the comparisons by lower(email) and the
-- unique index on users take them as one address. rbac.stored_email and Swift's `EmailAddress` write addresses
-- so.
--
-- An address stored otherwise stops the migration with the rows to look at, as sql/0013 does: mapped, it may
-- be another user's address. The view that finds them lasts only as long as this run.
CREATE TEMPORARY VIEW unmapped_email_domains AS
SELECT "table", email
FROM (SELECT 'users' AS "table", email FROM users
      UNION ALL SELECT 'user_identities', email FROM user_identities
      UNION ALL SELECT 'invitations', email FROM invitations) AS stored
WHERE NOT (split_part(email, '@', 2) IS NFKC NORMALIZED
           AND split_part(email, '@', 2) !~ '[\u3002\u00ad\u200b\u2060\ufeff]');

DO $$
DECLARE
    v_found text := (SELECT string_agg(n || ' row(s) of ' || "table", ', ' ORDER BY "table")
                     FROM (SELECT "table", count(*) AS n FROM unmapped_email_domains GROUP BY 1) AS found);
BEGIN
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION '% hold an email address with a domain that IDNA maps to another', v_found
            USING HINT = format('find them with %s; write each domain as rbac.mapped_domain does, or delete the '
                                'row, then migrate again',
                                regexp_replace(btrim(pg_get_viewdef('unmapped_email_domains'), ' ;'), '\s+', ' ', 'g'));
    END IF;
END $$;

DROP VIEW unmapped_email_domains;

ALTER TABLE users ADD CONSTRAINT users_email_domain_mapped
    CHECK (split_part(email, '@', 2) IS NFKC NORMALIZED
           AND split_part(email, '@', 2) !~ '[\u3002\u00ad\u200b\u2060\ufeff]');
ALTER TABLE user_identities ADD CONSTRAINT user_identities_email_domain_mapped
    CHECK (split_part(email, '@', 2) IS NFKC NORMALIZED
           AND split_part(email, '@', 2) !~ '[\u3002\u00ad\u200b\u2060\ufeff]');
ALTER TABLE invitations ADD CONSTRAINT invitations_email_domain_mapped
    CHECK (split_part(email, '@', 2) IS NFKC NORMALIZED
           AND split_part(email, '@', 2) !~ '[\u3002\u00ad\u200b\u2060\ufeff]');
