#!/usr/bin/env python3
"""A real OpenID provider for tests (oidc-provider-mock from PyPI), over HTTPS with a test CA's certificate.

    oidc_provider.py CERT KEY [SUB EMAIL NAME]...

Serves on a free loopback port and prints the port as its first line once it listens. Each SUB EMAIL NAME
triple is a user to sign in with one click, with a verified address. Nonces are required.
"""
import logging
import sys

import oidc_provider_mock
from werkzeug.serving import make_server


def main():
    cert, key, *people = sys.argv[1:]
    users = [
        oidc_provider_mock.User(sub=people[i], claims={"email": people[i + 1], "email_verified": True,
                                                       "name": people[i + 2]})
        for i in range(0, len(people), 3)
    ]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = oidc_provider_mock.app(require_nonce=True, user_claims=users)
    server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=(cert, key))
    print(server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
