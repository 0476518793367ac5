-- An address is stored with its domain in the letters it is written in, never in IDNA's ASCII spelling:
-- `ann@bücher.example`, not `ann@xn--bcher-kva.example`. Both reach one mailbox; with one of them stored, the
-- comparisons by lower(email) and the unique index on users take them as one address. rbac.stored_email and
-- Swift's `EmailAddress` write addresses so.
--
-- An address already stored in the ASCII spelling stops the migration with the rows to look at, as sql/0012
-- does: written the other way it may be another user's address.
DO $$
DECLARE
    c_finding constant text := format(
        'SELECT ''users'' AS "table", email FROM users WHERE %1$s UNION ALL '
        'SELECT ''user_identities'', email FROM user_identities WHERE %1$s UNION ALL '
        'SELECT ''invitations'', email FROM invitations WHERE %1$s',
        $r$split_part(email, '@', 2) ~ '(^|\.)[xX][nN]--'$r$);
    v_found text;
BEGIN
    EXECUTE format('SELECT string_agg(n || '' row(s) of '' || "table", '', '') '
                   'FROM (SELECT "table", count(*) AS n FROM (%s) f GROUP BY 1 ORDER BY 1) t', c_finding)
        INTO v_found;
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION '% hold an email address with a domain in IDNA''s ASCII spelling (xn--)', v_found
            USING HINT = format('find them with %s; write each domain in the letters it stands for, or delete the '
                                'row, then migrate again', c_finding);
    END IF;
END $$;

ALTER TABLE users ADD CONSTRAINT users_email_domain_letters
    CHECK (split_part(email, '@', 2) !~ '(^|\.)[xX][nN]--');
ALTER TABLE user_identities ADD CONSTRAINT user_identities_email_domain_letters
    CHECK (split_part(email, '@', 2) !~ '(^|\.)[xX][nN]--');
ALTER TABLE invitations ADD CONSTRAINT invitations_email_domain_letters
    CHECK (split_part(email, '@', 2) !~ '(^|\.)[xX][nN]--');
