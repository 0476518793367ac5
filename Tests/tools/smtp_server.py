#!/usr/bin/env python3
"""A real SMTP server for tests (aiosmtpd from PyPI) that requires STARTTLS, with a test CA's certificate.

    smtp_server.py CERT KEY ROOT

Listens on a free loopback port and prints the port as its first line once it listens. ROOT/replies, when
present, lists replies to give RCPT TO instead of accepting (one per line, from the top: "450 busy", "550 no").
Each message received is parsed with Python's email package, and what it says is appended to
ROOT/received.jsonl: envelope, headers as decoded, whether TLS carried it, and each part's type and text.
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


class Handler:
    def __init__(self, root: Path):
        self.root = root

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
            "mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos, "tls": session.ssl is not None,
            "from": str(message["From"]), "to": str(message["To"]), "subject": str(message["Subject"]),
            "message_id": str(message["Message-ID"]), "auto_submitted": str(message["Auto-Submitted"]),
            "content_type": message.get_content_type(), "parts": parts,
            "crlf_only": b"\n" not in envelope.content.replace(b"\r\n", b""),
        }
        with (self.root / "received.jsonl").open("a") as log:
            log.write(json.dumps(record) + "\n")
        return "250 Message accepted"


def main():
    cert, key, root = sys.argv[1:4]
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(Path(root)), hostname="127.0.0.1", port=port, tls_context=context,
                            require_starttls=True, server_hostname="localhost")
    controller.start()
    print(port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
