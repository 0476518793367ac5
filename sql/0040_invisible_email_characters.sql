-- Email addresses refuse the characters drawn as nothing (Unicode's Default_Ignorable_Code_Point: zero-width
-- spaces and joiners, direction marks, the soft hyphen, variation selectors, ...), as Swift's `EmailAddress` and
-- rbac.email_shape_refusal do (rbac.invisible_characters, spelled out here since migrations run before the
-- functions are defined). `pia@example.com` with a zero-width space before its @ reads as `pia@example.com` in
-- every listing, audit line and invitation, yet is another user; one of only such a character reads as no name.
-- A domain loses those IDNA ignores before it is stored (sql/0015), so this holds what is left.
--
-- An address that already holds one stops the migration with the rows to look at, as in sql/0012: only a person
-- can tell whom it should have named.
DO $$
DECLARE
    v_table text;
    v_finding text;
    v_count bigint;
    v_invisible constant text := '[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e'
        '\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a'
        '\U000e0000-\U000e0fff]';
BEGIN
    FOREACH v_table IN ARRAY ARRAY['users', 'user_identities', 'invitations'] LOOP
        v_finding := format('SELECT * FROM %I WHERE email ~ %L', v_table, v_invisible);
        EXECUTE format('SELECT count(*) FROM (%s) t', v_finding) INTO v_count;
        IF v_count > 0 THEN
            RAISE EXCEPTION '% row(s) of % hold an email address with an invisible character', v_count, v_table
                USING HINT = format('find them with %s; correct or delete them, then migrate again', v_finding);
        END IF;
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (email !~ %L)', v_table, v_table || '_email_visible',
                       v_invisible);
    END LOOP;
END $$;
