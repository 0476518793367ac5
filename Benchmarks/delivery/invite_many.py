#!/usr/bin/env python3
"""Creates invitations bound to addresses through rbac serve's API, so that rbac seals each link into the outbox.

    invite_many.py BASE_URL SERVICE_KEY PAIRS_FILE COUNT [THREADS]

PAIRS_FILE holds "couple_id owner_id" lines; the COUNT invitations go round them, made by each couple's owner.
Prints how many were created (201) and exits non-zero if any request failed.
"""
import http.client
import json
import sys
import threading
from urllib.parse import urlsplit


def main():
    base, key, pairs_file, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    pairs = [line.split() for line in open(pairs_file) if line.strip()]
    if not pairs:
        sys.exit(f"invite_many: {pairs_file} names no couple")
    url = urlsplit(base)
    created, failed, lock = [0], [], threading.Lock()

    def work(start):
        connection = http.client.HTTPConnection(url.hostname, url.port)
        for n in range(start, count, threads):
            couple, owner = pairs[n % len(pairs)]
            body = json.dumps({"role": "viewer", "email": f"guest{n}@example.com"})
            connection.request("POST", f"/v1/couples/{couple}/invitations", body,
                               {"Authorization": f"Bearer {key}", "X-Acting-User": owner,
                                "Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            with lock:
                if response.status == 201:
                    created[0] += 1
                else:
                    failed.append(response.status)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(created[0])
    if failed:
        print(f"invite_many: {len(failed)} requests failed, e.g. status {failed[0]}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
