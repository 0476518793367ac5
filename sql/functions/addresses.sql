-- Domains beyond ASCII, as IDNA writes them: each label with letters beyond ASCII has a second spelling in
-- ASCII, `xn--` and the label in Punycode (RFC 3492), which DNS knows it by. `bücher.example` and
-- `xn--bcher-kva.example` are one domain. Addresses are stored with the letters (rbac.stored_email), domains a
-- couple may invite in ASCII (rbac.ascii_domain).

-- Punycode's digit for 0 to 35: a to z, then 0 to 9.
CREATE OR REPLACE FUNCTION rbac.punycode_digit(p_digit bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT chr(CASE WHEN p_digit < 26 THEN 97 + p_digit ELSE 22 + p_digit END::integer)
$$;

-- Punycode's bias after a code point (RFC 3492, section 6.1, with its parameters): damp 700 after the first,
-- 2 after any other; skew 38.
CREATE OR REPLACE FUNCTION rbac.punycode_bias(p_delta bigint, p_points integer, p_first boolean) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    v_delta bigint := p_delta / CASE WHEN p_first THEN 700 ELSE 2 END;
    v_k integer := 0;
BEGIN
    v_delta := v_delta + v_delta / p_points;
    WHILE v_delta > ((36 - 1) * 26) / 2 LOOP
        v_delta := v_delta / (36 - 1);
        v_k := v_k + 36;
    END LOOP;
    RETURN v_k + (36 * v_delta) / (v_delta + 38);
END $$;

-- RFC 3492's encoding of one label's code points (section 6.3, with its parameters), without the `xn--`.
CREATE OR REPLACE FUNCTION rbac.punycode(p_label text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    c_base constant integer := 36;
    c_tmin constant integer := 1;
    c_tmax constant integer := 26;
    v_points integer[] := ARRAY(SELECT ascii(c) FROM regexp_split_to_table(p_label, '') WITH ORDINALITY AS t(c, i)
                                ORDER BY i);
    v_output text := (SELECT coalesce(string_agg(chr(p), '' ORDER BY i), '')
                      FROM unnest(v_points) WITH ORDINALITY AS t(p, i) WHERE p < 128);
    v_basic constant integer := length(v_output);
    v_handled integer := v_basic;
    v_n integer := 128;
    v_delta bigint := 0;
    v_bias integer := 72;
    v_point integer;
    v_q bigint;
    v_k integer;
    v_t integer;
BEGIN
    IF v_basic > 0 THEN
        v_output := v_output || '-';
    END IF;
    WHILE v_handled < cardinality(v_points) LOOP
        v_point := (SELECT min(p) FROM unnest(v_points) p WHERE p >= v_n);
        v_delta := v_delta + (v_point - v_n)::bigint * (v_handled + 1);
        v_n := v_point;
        FOREACH v_point IN ARRAY v_points LOOP
            IF v_point < v_n THEN
                v_delta := v_delta + 1;
            ELSIF v_point = v_n THEN
                v_q := v_delta;
                v_k := c_base;
                LOOP
                    v_t := least(greatest(v_k - v_bias, c_tmin), c_tmax);
                    EXIT WHEN v_q < v_t;
                    v_output := v_output || rbac.punycode_digit(v_t + (v_q - v_t) % (c_base - v_t));
                    v_q := (v_q - v_t) / (c_base - v_t);
                    v_k := v_k + c_base;
                END LOOP;
                v_output := v_output || rbac.punycode_digit(v_q);
                v_bias := rbac.punycode_bias(v_delta, v_handled + 1, v_handled = v_basic);
                v_delta := 0;
                v_handled := v_handled + 1;
            END IF;
        END LOOP;
        v_delta := v_delta + 1;
        v_n := v_n + 1;
    END LOOP;
    RETURN v_output;
END $$;

-- RFC 3492's decoding of one label (section 6.2), without the `xn--`: the text it stands for, or NULL when it
-- is not Punycode or stands for ASCII alone, which no label IDNA writes so does. Swift's `IDNA` (module
-- Collaboration) decodes the same way.
CREATE OR REPLACE FUNCTION rbac.punycode_decode(p_encoded text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    c_base constant integer := 36;
    -- The digits in their order, in either case: a to z, 0 to 9.
    c_digits constant text := 'abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
    -- Past it, no code point can come out: checked before anything can overflow.
    c_limit constant bigint := 1114112::bigint * (length(p_encoded) + 1);
    -- The code points before the last hyphen are themselves, when there are some; the rest are digits.
    v_hyphen constant integer := strpos(reverse(p_encoded), '-');
    v_basics constant integer := CASE WHEN v_hyphen > 0 THEN length(p_encoded) - v_hyphen ELSE 0 END;
    v_basic constant text := left(p_encoded, v_basics);
    v_digits constant text := CASE WHEN v_basics > 0 THEN substr(p_encoded, v_basics + 2) ELSE p_encoded END;
    v_output integer[] := ARRAY(SELECT ascii(c) FROM unnest(string_to_array(v_basic, NULL)) WITH ORDINALITY AS t(c, i)
                                ORDER BY i);
    -- Where the next digit is read, and the digit.
    v_at integer := 1;
    v_digit integer;
    -- Section 6.2's n and i, i before the variable-length integer being read, and that integer's weight.
    v_n bigint := 128;
    v_i bigint := 0;
    v_start bigint;
    v_weight bigint;
    -- The bias, and the threshold t at k.
    v_bias integer := 72;
    v_k integer;
    v_t integer;
BEGIN
    IF v_basic !~ '^[\x01-\x7f]*$' THEN
        RETURN NULL;
    END IF;
    WHILE v_at <= length(v_digits) LOOP
        v_start := v_i;
        v_weight := 1;
        v_k := c_base;
        LOOP
            v_digit := (strpos(c_digits, substr(v_digits, v_at, 1)) - 1) % c_base;
            IF v_at > length(v_digits) OR v_digit < 0 THEN
                RETURN NULL;
            END IF;
            v_at := v_at + 1;
            v_i := v_i + v_digit * v_weight;
            IF v_i >= c_limit THEN
                RETURN NULL;
            END IF;
            v_t := least(greatest(v_k - v_bias, 1), 26);
            EXIT WHEN v_digit < v_t;
            v_weight := v_weight * (c_base - v_t);
            v_k := v_k + c_base;
        END LOOP;
        v_bias := rbac.punycode_bias(v_i - v_start, cardinality(v_output) + 1, v_start = 0);
        v_n := v_n + v_i / (cardinality(v_output) + 1);
        v_i := v_i % (cardinality(v_output) + 1);
        IF v_n > 1114111 OR v_n BETWEEN 55296 AND 57343 THEN
            RETURN NULL;
        END IF;
        v_output := v_output[1:v_i] || v_n::integer || v_output[v_i + 1:];
        v_i := v_i + 1;
    END LOOP;
    RETURN (SELECT string_agg(chr(p), '' ORDER BY i) FROM unnest(v_output) WITH ORDINALITY AS t(p, i)
            HAVING max(p) >= 128);
END $$;

-- p_domain as UTS 46 maps what people type before IDNA reads it: compatibility forms in their plain form (NFKC:
-- `ｂücher．example` is `bücher.example`), the ideographic full stops (U+3002, U+FF61) as dots, and what UTS 46
-- ignores, the soft hyphen and the zero-width space, word joiner and no-break space, dropped. Case is left as
-- written: addresses are compared lowered. Swift's `IDNA.mapped` does the same.
CREATE OR REPLACE FUNCTION rbac.mapped_domain(p_domain text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT translate(normalize(p_domain, NFKC), U&'\3002\00AD\200B\2060\FEFF', '.')
$$;

-- A domain as DNS knows it, so that an address and a couple's list of domains compare alike however each was
-- written: mapped (rbac.mapped_domain), lower case, and each label with letters beyond ASCII in Punycode behind
-- `xn--`: `Bücher.example` is `xn--bcher-kva.example`. Letters beyond ASCII are lowered as the database's locale
-- lowers them.
CREATE OR REPLACE FUNCTION rbac.ascii_domain(p_domain text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(CASE WHEN label ~ '^[\x01-\x7f]*$' THEN label ELSE 'xn--' || rbac.punycode(label) END, '.'
                      ORDER BY n)
    FROM regexp_split_to_table(normalize(lower(rbac.mapped_domain(p_domain)), NFC), '\.') WITH ORDINALITY AS l(label, n)
$$;

-- p_domain with each label written `xn--…` (in either case) in the letters it stands for: the reverse of
-- rbac.ascii_domain but for case. NULL when such a label is not Punycode, or stands for one IDNA refuses: one
-- with hyphens third and fourth (RFC 5891, 4.2.3.1), which written in letters would read as written in ASCII, or
-- one that mapping changes (UTS 46, 4.1), which DNS would know by another name than its letters'.
CREATE OR REPLACE FUNCTION rbac.unicode_domain(p_domain text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN bool_and(letters IS NOT NULL) THEN string_agg(letters, '.' ORDER BY n) END
    FROM regexp_split_to_table(p_domain, '\.') WITH ORDINALITY AS l(label, n),
         LATERAL rbac.punycode_decode(CASE WHEN label ~ '^[xX][nN]--' THEN substr(label, 5) END) AS p(decoded),
         LATERAL (SELECT CASE WHEN label !~ '^[xX][nN]--' THEN label
                              WHEN substr(decoded, 3, 2) <> '--' AND rbac.mapped_domain(decoded) = decoded
                                  THEN decoded END) AS d(letters)
$$;
