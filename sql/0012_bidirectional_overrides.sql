-- Email addresses refuse Unicode's bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066
-- to U+2069) as well, as Swift's `EmailAddress` and rbac.is_email_address do: one left open turns the text
-- after it around wherever the address is shown, in a listing, an audit line or an invitation page.
--
-- An address that already holds one stops the migration with the rows to look at, rather than being changed
-- or dropped here: only a person can tell what it should have been.
DO $$
DECLARE
    v_table text;
    v_count bigint;
    v_finding text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['users', 'user_identities', 'invitations'] LOOP
        v_finding := format('SELECT * FROM %I WHERE email ~ %L', v_table, '[\u202a-\u202e\u2066-\u2069]');
        EXECUTE format('SELECT count(*) FROM (%s) t', v_finding) INTO v_count;
        IF v_count > 0 THEN
            RAISE EXCEPTION '% row(s) of % hold an email address with a bidirectional override', v_count, v_table
                USING HINT = format('find them with %s; correct or delete them, then migrate again', v_finding);
        END IF;
        EXECUTE format($f$
            ALTER TABLE %1$I
                DROP CONSTRAINT %2$I,
                ADD CONSTRAINT %2$I CHECK (
                    email ~ '^[^@]+@[^@]+\.[^@]+$'
                    AND email !~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202a-\u202f\u205f'
                                 '\u2066-\u2069\u3000]'
                    AND length(email) <= 320)
            $f$, v_table, v_table || '_email_check');
    END LOOP;
END $$;
