#!/usr/bin/env python3
"""Keys and tokens for tests, made outside rbac: keys by the openssl CLI, JWKs and signatures by PyJWT.

    jwt_tool.py key DIR NAME ALG           makes DIR/NAME.pem (ES256, RS256 or EdDSA); prints its public JWK,
                                           with kid NAME
    jwt_tool.py sign DIR NAME ALG CLAIMS   prints a token of the JSON claims, signed with DIR/NAME.pem, kid NAME
    jwt_tool.py hs256 SECRET CLAIMS        prints a token signed with the shared secret
"""
import json
import subprocess
import sys
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization

OPTIONS = {
    "ES256": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "RS256": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
    "EdDSA": ["-algorithm", "ED25519"],
}


def load(directory, name):
    return serialization.load_pem_private_key((Path(directory) / f"{name}.pem").read_bytes(), password=None)


def main():
    command, *arguments = sys.argv[1:]
    if command == "key":
        directory, name, alg = arguments
        subprocess.run(["openssl", "genpkey", *OPTIONS[alg], "-out", str(Path(directory) / f"{name}.pem")],
                       check=True, capture_output=True)
        jwk = json.loads(jwt.get_algorithm_by_name(alg).to_jwk(load(directory, name).public_key()))
        print(json.dumps({**jwk, "kid": name, "alg": alg, "use": "sig"}))
    elif command == "sign":
        directory, name, alg, claims = arguments
        print(jwt.encode(json.loads(claims), load(directory, name), algorithm=alg, headers={"kid": name}))
    elif command == "hs256":
        secret, claims = arguments
        print(jwt.encode(json.loads(claims), secret, algorithm="HS256"))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
