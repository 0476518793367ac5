#!/usr/bin/env python3
"""A real SMTP server for tests (aiosmtpd from PyPI) that requires STARTTLS, with a test CA's certificate.

    smtp_server.py CERT KEY ROOT

Listens on a free loopback port and prints the port as its first line once it listens. ROOT/replies, when
present, lists replies to give RCPT TO instead of accepting (one per line, from the top: "450 busy", "550 no").
ROOT/credentials, when present ("user:password"), makes it require AUTH (offered after STARTTLS only) before
MAIL FROM.
Each message received is parsed with Python's email package, and what it says is appended to
ROOT/received.jsonl: envelope (with MAIL FROM's options: SMTPUTF8, which it offers), headers as decoded and
whether they were all ASCII as sent, whether TLS carried it, and each part's type and text.
"""
import email
import json
import socket
import ssl
import sys
import threading
from email import policy
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Handler:
    def __init__(self, root: Path):
        self.root = root

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if (self.root / "credentials").exists() and not session.authenticated:
            return "530 5.7.0 Authentication required"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        replies = self.root / "replies"
        lines = replies.read_text().splitlines() if replies.exists() else []
        if lines:
            replies.write_text("\n".join(lines[1:]))
            return lines[0]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=policy.default)
        parts = [{"type": part.get_content_type(), "text": part.get_content()}
                 for part in message.walk() if not part.is_multipart()]
        record = {
            "mail_from": envelope.mail_from, "mail_options": envelope.mail_options, "rcpt_tos": envelope.rcpt_tos,
            "tls": session.ssl is not None,
            "from": str(message["From"]), "to": str(message["To"]), "subject": str(message["Subject"]),
            "from_addresses": [[a.display_name, a.addr_spec] for a in message["From"].addresses],
            "message_id": str(message["Message-ID"]), "auto_submitted": str(message["Auto-Submitted"]),
            "content_type": message.get_content_type(), "parts": parts,
            "crlf_only": b"\n" not in envelope.content.replace(b"\r\n", b""),
            "headers_ascii": envelope.content.split(b"\r\n\r\n", 1)[0].isascii(),
            "authenticated": bool(session.authenticated),
        }
        with (self.root / "received.jsonl").open("a") as log:
            log.write(json.dumps(record) + "\n")
        return "250 Message accepted"


class Authenticator:
    """Takes the login in ROOT/credentials, and no other."""

    def __init__(self, root: Path):
        self.root = root

    def __call__(self, server, session, envelope, mechanism, auth_data):
        credentials = self.root / "credentials"
        if not isinstance(auth_data, LoginPassword) or not credentials.exists():
            return AuthResult(success=False, handled=False)
        user, password = credentials.read_text().strip().split(":", 1)
        return AuthResult(success=(auth_data.login.decode(), auth_data.password.decode()) == (user, password),
                          handled=False)


def main():
    cert, key, root = sys.argv[1:4]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(Path(root)), hostname="127.0.0.1", port=port, tls_context=context,
                            require_starttls=True, server_hostname="localhost",
                            authenticator=Authenticator(Path(root)), auth_require_tls=True,
                            enable_SMTPUTF8=True)
    controller.start()
    print(port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
