#!/usr/bin/env python3
"""A webhook receiver for tests, verifying every delivery with the reference Standard Webhooks implementation.

    webhook_receiver.py CERT KEY ROOT

Serves HTTPS on a free loopback port and prints the port as its first line once it listens. ROOT/secret holds the
endpoint's secret (whsec_...), read at each delivery; ROOT/statuses, when present, lists the statuses to answer
with, one per line, taken from the top (then 204), each with a header field after it when one follows ("503
Retry-After: 60"); "sleep N" answers 204 after N seconds. Each request's
webhook-id is appended to ROOT/arrived as it arrives; each delivery, once answered, to ROOT/received.jsonl: its
webhook-id, its type, whether it verified, the status answered, the invitation link it carried, and the event
itself once verified.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from standardwebhooks import Webhook
from tls_server import serve

lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    root: Path

    def log_message(self, *_):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with lock:
            with (self.root / "arrived").open("a") as arrived:
                arrived.write(f"{self.headers.get('webhook-id')}\n")
        try:
            event = Webhook((self.root / "secret").read_text().strip()).verify(body, dict(self.headers))
            verified, kind, link = True, event.get("type"), event.get("data", {}).get("link")
        except Exception:
            event, verified, kind, link = None, False, None, None
        with lock:
            statuses = self.root / "statuses"
            lines = statuses.read_text().splitlines() if statuses.exists() else []
            answer = lines[0].split(maxsplit=1) if lines else ["204"]
            if lines:
                statuses.write_text("\n".join(lines[1:]))
        if answer[0] == "sleep":  # a receiver too slow to answer in time
            time.sleep(float(answer[1]))
            answer = ["204"]
        status = int(answer[0])
        with lock:
            with (self.root / "received.jsonl").open("a") as log:
                log.write(json.dumps({"id": self.headers.get("webhook-id"), "type": kind, "verified": verified,
                                      "status": status, "link": link, "event": event}) + "\n")
        self.send_response(status)
        if len(answer) > 1:
            name, value = answer[1].split(":", 1)
            self.send_header(name, value.strip())
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    cert, key, root = sys.argv[1:4]
    Handler.root = Path(root)
    serve(Handler, cert, key)


if __name__ == "__main__":
    main()
