#!/usr/bin/env python3
"""Tokens for the verification matrix, made by implementations other than rbac's.

    token_matrix.py DIR NOW

Makes keys with the openssl CLI in DIR (P-256, RSA 2048, Ed25519, and keys the JWKS does not hold), writes
DIR/jwks.json (public keys only, built by PyJWT) and DIR/secret (the HS256 secret), and prints a JSON array of
{"name", "token", "expect"}: "ok" or the refusal reason rbac must give. Tokens are signed by PyJWT, a few by the
openssl CLI itself; the hostile ones (alg none, HS256 under a public key, tampering) are put together by hand.
NOW is the Unix time the verifier will use.
"""
import base64
import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

ISSUER = "https://issuer.test"
AUDIENCE = "rbac"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def openssl(*arguments: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["openssl", *arguments], input=data, capture_output=True, check=True).stdout


def main() -> None:
    directory, now = Path(sys.argv[1]), int(sys.argv[2])
    specs = {
        "es": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        "rs": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        "ed": ["-algorithm", "ED25519"],
        "weak": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
        "es-other": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        "rs-other": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        "ed-other": ["-algorithm", "ED25519"],
    }
    private = {}
    for kid, options in specs.items():
        path = directory / f"{kid}.pem"
        openssl("genpkey", *options, "-out", str(path))
        private[kid] = serialization.load_pem_private_key(path.read_bytes(), password=None)

    algorithms = {"es": "ES256", "rs": "RS256", "ed": "EdDSA", "weak": "RS256"}
    keys = []
    for kid, alg in algorithms.items():
        jwk = json.loads(jwt.get_algorithm_by_name(alg).to_jwk(private[kid].public_key()))
        keys.append({**jwk, "kid": kid, "use": "sig", "alg": alg})
    (directory / "jwks.json").write_text(json.dumps({"keys": keys}))
    secret = b"a development secret of 32 bytes!"
    (directory / "secret").write_bytes(secret)

    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "auth0|64f1c", "exp": now + 300, "iat": now - 10}
    cases = []

    def add(name, token, expect):
        cases.append({"name": name, "token": token, "expect": expect})

    for kid, alg in [("es", "ES256"), ("rs", "RS256"), ("ed", "EdDSA"), ("hs", "HS256")]:
        key = secret if kid == "hs" else private[kid]
        other = b"another secret, not rbac's one!!" if kid == "hs" else private[f"{kid}-other"]
        header = {} if kid == "hs" else {"kid": kid}

        def sign(claims, signing_key=key, headers=header):
            return jwt.encode(claims, signing_key, algorithm=alg, headers=headers)

        valid = sign(base)
        add(f"{alg} valid", valid, "ok")
        add(f"{alg} aud as a list", sign({**base, "aud": ["other", AUDIENCE]}), "ok")
        add(f"{alg} exp within the leeway", sign({**base, "exp": now - 30}), "ok")
        add(f"{alg} wrong key", sign(base, other), "bad_signature")
        h, p, s = valid.split(".")
        tampered = json.loads(base64.urlsafe_b64decode(p + "=="))
        tampered["sub"] = "auth0|someone-else"
        add(f"{alg} tampered payload", f"{h}.{b64(json.dumps(tampered).encode())}.{s}", "bad_signature")
        header_fields = json.loads(base64.urlsafe_b64decode(h + "=="))
        add(f"{alg} tampered header", f"{b64(json.dumps({**header_fields, 'typ': 'JOSE'}).encode())}.{p}.{s}",
            "bad_signature")
        add(f"{alg} expired", sign({**base, "exp": now - 61}), "expired")
        add(f"{alg} no exp", sign({k: v for k, v in base.items() if k != "exp"}), "no_exp")
        add(f"{alg} string exp", sign({**base, "exp": str(now + 300)}), "malformed")
        add(f"{alg} boolean exp", sign({**base, "exp": True}), "malformed")
        add(f"{alg} future nbf", sign({**base, "nbf": now + 120}), "not_yet_valid")
        add(f"{alg} future iat", sign({**base, "iat": now + 120}), "issued_in_future")
        add(f"{alg} wrong iss", sign({**base, "iss": "https://evil.test"}), "wrong_issuer")
        add(f"{alg} no iss", sign({k: v for k, v in base.items() if k != "iss"}), "wrong_issuer")
        add(f"{alg} wrong aud", sign({**base, "aud": "someone-else"}), "wrong_audience")
        add(f"{alg} no sub", sign({k: v for k, v in base.items() if k != "sub"}), "no_sub")
        if kid != "hs":
            add(f"{alg} unknown kid", sign(base, other, {"kid": "rotated-away"}), "unknown_key")

    # Signed by the openssl CLI rather than PyJWT.
    def cli_token(kid, alg, digest_args):
        signing_input = f"{b64(json.dumps({'alg': alg, 'kid': kid}).encode())}.{b64(json.dumps(base).encode())}"
        # pkeyutl signs Ed25519 in one shot, from a file whose size it can read.
        message = directory / f"{kid}.input"
        message.write_text(signing_input)
        key = str(directory / f"{kid}.pem")
        signature = openssl(*digest_args, "-inkey", key, "-in", str(message)) if digest_args[0] == "pkeyutl" \
            else openssl(*digest_args, "-sign", key, str(message))
        if alg == "ES256":
            r, s = decode_dss_signature(signature)
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input}.{b64(signature)}"

    add("RS256 by openssl dgst", cli_token("rs", "RS256", ["dgst", "-sha256"]), "ok")
    add("ES256 by openssl dgst", cli_token("es", "ES256", ["dgst", "-sha256"]), "ok")
    add("EdDSA by openssl pkeyutl", cli_token("ed", "EdDSA", ["pkeyutl", "-sign", "-rawin"]), "ok")

    # Algorithm confusion and other hostile headers, put together by hand.
    payload = b64(json.dumps(base).encode())
    none_input = f"{b64(json.dumps({'alg': 'none'}).encode())}.{payload}"
    add("alg none", f"{none_input}.", "unsupported_alg")
    add("alg None", f"{b64(json.dumps({'alg': 'None', 'kid': 'rs'}).encode())}.{payload}.", "unsupported_alg")
    public_pem = private["rs"].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    confused = f"{b64(json.dumps({'alg': 'HS256', 'kid': 'rs'}).encode())}.{payload}"
    add("HS256 under the RSA public key", f"{confused}.{b64(hmac.new(public_pem, confused.encode(), hashlib.sha256).digest())}",
        "bad_signature")
    rs_as_es = jwt.encode(base, private["rs"], algorithm="RS256", headers={"kid": "rs"}).split(".")
    es_header = b64(json.dumps({"alg": "ES256", "kid": "rs"}).encode())
    add("RS256 key named in an ES256 header", f"{es_header}.{rs_as_es[1]}.{rs_as_es[2]}", "bad_signature")
    add("ES256 signature under the RS256 kid",
        jwt.encode(base, private["es"], algorithm="ES256", headers={"kid": "rs"}), "bad_signature")
    add("a 1024-bit RSA key", jwt.encode(base, private["weak"], algorithm="RS256", headers={"kid": "weak"}),
        "unknown_key")
    add("RS512", jwt.encode(base, private["rs"], algorithm="RS512", headers={"kid": "rs"}), "unsupported_alg")
    add("a critical extension", jwt.encode(base, private["rs"], algorithm="RS256",
                                           headers={"kid": "rs", "crit": ["exp"], "exp": 1}), "unsupported_alg")
    add("bad base64", "eyJhbGciOiJSUzI1NiJ9.***.abc", "malformed")
    add("payload not JSON", f"{b64(json.dumps({'alg': 'HS256'}).encode())}.{b64(b'not json')}." +
        b64(hmac.new(secret, (b64(json.dumps({'alg': 'HS256'}).encode()) + '.' + b64(b'not json')).encode(),
                     hashlib.sha256).digest()), "malformed")
    add("two parts", "abc.def", "malformed")

    # Signed as they are written: JSON that readers read differently (RFC 7519, 4: a claim named twice must be
    # refused, or read as its last value; rbac's decoder would read the first).
    def hs_signed(header_json: str, payload_json: str) -> str:
        signing_input = f"{b64(header_json.encode())}.{b64(payload_json.encode())}"
        return f"{signing_input}.{b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"

    claims = json.dumps(base)[1:-1]
    add("sub named twice", hs_signed('{"alg":"HS256"}', '{"sub":"auth0|someone-else",' + claims + '}'), "malformed")
    add("alg named twice", hs_signed('{"alg":"HS256","alg":"none"}', json.dumps(base)), "malformed")
    add("a trailing comma in the claims", hs_signed('{"alg":"HS256"}', '{' + claims + ',}'), "malformed")
    add("written by hand", hs_signed('{"alg":"HS256"}', '{' + claims + '}'), "ok")
    add("16 KB", jwt.encode({**base, "pad": "x" * 16384}, secret, algorithm="HS256"), "too_long")
    print(json.dumps(cases))


if __name__ == "__main__":
    main()
