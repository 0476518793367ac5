-- Domains beyond ASCII, as IDNA writes them: each label with letters beyond ASCII has a second spelling in
-- ASCII, `xn--` and the label in Punycode (RFC 3492), which DNS knows it by. `bücher.example` and
-- `xn--bcher-kva.example` are one domain.

-- Punycode's digit for 0 to 35: a to z, then 0 to 9.
CREATE OR REPLACE FUNCTION rbac.punycode_digit(p_digit bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT chr(CASE WHEN p_digit < 26 THEN 97 + p_digit ELSE 22 + p_digit END::integer)
$$;

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
                -- Bias adaptation (section 6.1): damp 700 on the first delta, 2 after; skew 38.
                v_delta := v_delta / CASE WHEN v_handled = v_basic THEN 700 ELSE 2 END;
                v_delta := v_delta + v_delta / (v_handled + 1);
                v_k := 0;
                WHILE v_delta > ((c_base - c_tmin) * c_tmax) / 2 LOOP
                    v_delta := v_delta / (c_base - c_tmin);
                    v_k := v_k + c_base;
                END LOOP;
                v_bias := v_k + ((c_base - c_tmin + 1) * v_delta) / (v_delta + 38);
                v_delta := 0;
                v_handled := v_handled + 1;
            END IF;
        END LOOP;
        v_delta := v_delta + 1;
        v_n := v_n + 1;
    END LOOP;
    RETURN v_output;
END $$;

-- A domain as DNS knows it, so that an address and a couple's list of domains compare alike however each was
-- written (IDNA): lower case, the other full stops IDNA takes (U+3002, U+FF0E, U+FF61) as dots, and each label
-- with letters beyond ASCII in its composed form (NFC) and then in Punycode (RFC 3492) behind `xn--`:
-- `Bücher.example` is `xn--bcher-kva.example`. Letters beyond ASCII are lowered as the database's locale
-- lowers them. UTS 46's further mappings (compatibility forms, deleted characters) are not made: a domain that
-- needs them is compared as written.
CREATE OR REPLACE FUNCTION rbac.ascii_domain(p_domain text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(CASE WHEN label ~ '^[\x01-\x7f]*$' THEN label ELSE 'xn--' || rbac.punycode(label) END, '.'
                      ORDER BY n)
    FROM regexp_split_to_table(normalize(lower(translate(p_domain, U&'\3002\FF0E\FF61', '...')), NFC), '\.')
         WITH ORDINALITY AS l(label, n)
$$;
