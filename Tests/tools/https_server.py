#!/usr/bin/env python3
"""A real HTTPS server for tests of rbac's outbound requests.

    https_server.py CERT KEY ROOT

Serves the files in ROOT over TLS on a free loopback port, and prints the port as its first line once it
listens. A file's sidecar NAME.headers (JSON) adds header fields to its answer; NAME.status sets its status.
Two paths are made up: /slow answers after 5 seconds (making ROOT/slow.asked as it arrives), /big with 2 MiB.
Files may change while it runs.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tls_server import serve


class Handler(BaseHTTPRequestHandler):
    root: Path

    def log_message(self, *_):
        pass

    def answer(self, status, body, headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/slow":
            (self.root / "slow.asked").touch()
            time.sleep(5)
            return self.answer(200, b"late")
        if self.path == "/big":
            return self.answer(200, b"x" * (2 << 20))
        path = (self.root / self.path.lstrip("/").split("?")[0]).resolve()
        if self.root not in path.parents or not path.is_file():
            return self.answer(404, b"not found")
        sidecar = path.with_name(path.name + ".headers")
        headers = json.loads(sidecar.read_text()) if sidecar.exists() else {}
        status_file = path.with_name(path.name + ".status")
        status = int(status_file.read_text()) if status_file.exists() else 200
        self.answer(status, path.read_bytes(), {"Content-Type": "application/json", **headers})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        self.answer(200, json.dumps({"path": self.path, "body": body.decode(),
                                     "content_type": self.headers.get("Content-Type")}).encode(),
                    {"Content-Type": "application/json"})


def main():
    cert, key, root = sys.argv[1:4]
    Handler.root = Path(root).resolve()
    serve(Handler, cert, key)


if __name__ == "__main__":
    main()
