#!/usr/bin/env python3
"""The reliability suite (scripts/reliability): faults, races and abuse against `rbac serve` (release) on the
disposable PostgreSQL that scripts/with-postgres started. Each scenario prints one line, PASS or FAIL, with its
figures; the process exits 1 when any failed.

1. revocations under load: 8 clients check one (couple, user, permission) at a time on instance A while the
   membership is removed by raw SQL, by `rbac revoke` and through instance B, round after round; PostgreSQL is
   restarted (-m fast, then -m immediate) mid-run, and CPU hogs load the host for part of it. A stale allow is
   an `allowed: true` for a check sent later than --max-staleness after the removal committed.
2. the change feed's connection terminated and a raw-SQL removal at once, 20 rounds: stale allows.
3. races, ROUNDS each: two owners removed at once (raw SQL, functions, CLI): ownerless couples; one token
   redeemed by 20 clients: memberships per token; accept against revoke: outcomes that disagree.
4. SIGTERM under 64 connections: requests sent before the signal that got no answer, and the exit status.
5. a bad-input corpus over HTTP and the CLI: 5xx answers, crashes, secrets echoed, and the data before and after.
6. deadlocks: ROUNDS x 10 rounds, each racing three calls drawn at random from 35 calls of the collaboration
   functions on one couple (deletions, invitations, joinings, removals, transfers, its own roles, invitations
   made and then used, ...), straight to SQL and never run again: the functions take shared rows in one order
   (docs/architecture.md), so none should deadlock.
7. a black-holed database: instance C reaches PostgreSQL over TCP through a port whose packets iptables drops
   for HOLE seconds, as when the database's host vanishes. 4 clients check throughout: how long a check waited
   inside the hole for its answer (503), and how long after the hole checks were answered again, and from the
   cache again. Needs root and iptables; skipped, and said so, without them.
8. SIGTERM with the database black-holed: an instance whose service key was used (a use it records as it stops)
   is stopped in the hole: seconds to its exit, against its --drain-timeout. Needs what 7 needs.
9. keyed payments through restarts: 8 clients record payments, each with an Idempotency-Key of its own and an
   amount no other has, sending each again (to A and B in turn) until it is answered 201, while PostgreSQL is
   restarted (-m fast, then -m immediate); then every payment is sent once more. Payments made twice, answered
   ones missing, replays that differ from the first answer, and answers other than 201, 409 (running or outcome
   unknown) and 503. A payment whose outcome the service could not know (the restart cut its statement off) is
   given up, as a client would after looking; it must have been made at most once.
10. webhooks through kills and restarts: membership changes, each a webhook to a receiver that verifies it with the
   reference Standard Webhooks implementation, while two `rbac deliver` workers are killed (SIGKILL) or stopped
   (SIGTERM) at random every half second or so and started again, and PostgreSQL is restarted (-m fast, then -m
   immediate); then the leases run out and `rbac deliver --once` sends what is left. A message never delivered,
   pending or dead, a delivery that did not verify or names an id or type the outbox does not hold, a stopped
   worker that did not exit 0 within 5 s, and one that exited on its own fail; deliveries sent again are counted
   (at least once, not exactly).
"""

import base64
import contextlib
import hashlib
import hmac
import http.client
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

import psycopg

RBAC = os.path.abspath(os.environ["RBAC"])
SECONDS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
DB = "rbac_reliability"
BOUND = 0.050  # the --max-staleness instance A runs with, in seconds
ROUNDS = 200
HOLE = 60  # seconds the black-holed database drops every packet
SECRET = base64.b64encode(os.urandom(32)).decode()
CLUSTER = os.environ["RBAC_TEST_CLUSTER"]
HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, DATABASE_URL=f"dbname={DB}", RBAC_JWT_SECRET=SECRET, RBAC_PUBLIC_URL="http://rbac.test")
failures, skipped = [], []
reported = [0]


def report(name, passed, figures):
    print(f"{'PASS' if passed else 'FAIL'}  {name:<44} {figures}", flush=True)
    reported[0] += 1
    if not passed:
        failures.append(name)


def skip(name, why):
    print(f"SKIP  {name:<44} {why}", flush=True)
    skipped.append(name)


def now():
    return time.monotonic()


def sql(query, params=(), fetch=False):
    with psycopg.connect(dbname=DB, autocommit=True) as connection:
        cursor = connection.execute(query, params)
        return cursor.fetchall() if fetch else None


def rbac(*arguments):
    return subprocess.run([RBAC, *arguments], env=ENV, capture_output=True, text=True, timeout=60)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def jwt(user):
    def part(data):
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    signing_input = part({"alg": "HS256", "typ": "JWT"}) + "." + part({"sub": user, "exp": int(time.time()) + 600})
    signature = hmac.new(SECRET.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


class Server:
    """One `rbac serve` process on a free port. Every one started is in `started`, for main to kill those left
    running when the suite ends early: they would outlive the disposable cluster, retrying it for ever."""

    started = []

    def __init__(self, name, *arguments, env=ENV):
        self.port = free_port()
        self.log = open(os.path.join(CLUSTER, f"reliability-{name}.log"), "w")
        self.process = subprocess.Popen(
            [RBAC, "serve", "--port", str(self.port), "--log-level", "warning", *arguments],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        Server.started.append(self.process)
        deadline = now() + 30
        while now() < deadline:
            if Client(self.port).call("GET", "/ready")[0] == 200:
                return
            time.sleep(0.05)
        raise SystemExit(f"reliability: {name} never became ready; see {self.log.name}")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


class Client:
    """A keep-alive HTTP connection; a failed call reconnects on the next one."""

    def __init__(self, port, key=None, acting=None, timeout=10):
        self.port, self.connection, self.timeout = port, None, timeout
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        if acting:
            self.headers["X-Acting-User"] = acting

    def call(self, method, path, body=None, headers=None):
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            self.connection.request(method, path, body=data, headers={**self.headers, **(headers or {})})
            response = self.connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as error:
            if self.connection:
                self.connection.close()
            self.connection = None
            return None, str(error).encode()

    def check(self, couple, user, permission="budget.edit"):
        status, body = self.call("POST", "/v1/check", {"couple_id": couple, "user_id": user, "permission": permission})
        return status, status == 200 and json.loads(body)["allowed"]


def seed(couples):
    """`couples` couples, each with an owner and a planner; returns [(couple, owner, planner)]."""
    with psycopg.connect(dbname=DB, autocommit=True) as connection:
        rows = []
        for _ in range(couples):
            owner, planner = (
                connection.execute(
                    "INSERT INTO users (email) VALUES (%s) RETURNING id::text", (f"{uuid.uuid4()}@example.com",)
                ).fetchone()[0]
                for _ in range(2))
            couple = connection.execute("SELECT (create_couple('Reliability', %s)).id::text", (owner,)).fetchone()[0]
            connection.execute("SELECT grant_role(%s, %s, 'planner')", (couple, planner))
            rows.append((couple, owner, planner))
        return rows


def restart_postgres(mode):
    command = [os.path.join(os.environ["PG_BINDIR"], "pg_ctl"), "-D", os.path.join(CLUSTER, "data"), "-l",
               os.path.join(CLUSTER, "server.log"), "-m", mode, "-w", "-t", "60", "restart"]
    if os.getuid() == 0:
        command = ["runuser", "-u", "postgres", "--"] + command
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


def hog(seconds):
    """A process that keeps one core busy for `seconds`."""
    return subprocess.Popen([sys.executable, "-c", f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"])


def revocations_under_load(key, a, b):
    pairs = seed(SECONDS * 20)  # more than can be used: a round takes 50 ms at the least
    target = {"round": -1, "pair": None}
    answers = {}  # round -> [(sent, received, status, allowed)]
    lock, stop = threading.Lock(), threading.Event()

    def checker():
        client = Client(a.port, key)
        while not stop.is_set():
            with lock:
                round_, pair = target["round"], target["pair"]
            if pair is None:
                time.sleep(0.001)
                continue
            sent = now()
            status, allowed = client.check(pair[0], pair[2])
            with lock:
                answers.setdefault(round_, []).append((sent, now(), status, allowed))

    threads = [threading.Thread(target=checker, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    b_client = Client(b.port, key)
    start = now()
    restarts = [(0.4, "fast"), (0.7, "immediate")]
    recovery, hogs, lags, stale, worst, errors, rounds = [], [], [], 0, 0.0, 0, 0
    for round_, pair in enumerate(pairs):
        elapsed = (now() - start) / SECONDS
        if elapsed >= 1:
            break
        if 0.2 <= elapsed < 0.6 and not hogs:
            hogs = [hog(SECONDS * 0.4) for _ in range(os.cpu_count() or 2)]
        if restarts and elapsed >= restarts[0][0]:
            # From the restart's start to the first check answered again: the outage as clients see it.
            restarted = now()
            restart_postgres(restarts.pop(0)[1])
            while Client(a.port, key).check(pair[0], pair[2])[0] != 200 and now() - restarted < 60:
                time.sleep(0.01)
            recovery.append(now() - restarted)
        with lock:
            target["round"], target["pair"] = round_, pair
        # Warm: the cache holds the planner's set once a few checks said yes.
        warm_deadline = now() + 2
        while now() < warm_deadline and sum(1 for x in answers.get(round_, []) if x[3]) < 10:
            time.sleep(0.001)
        method = ("raw SQL", "CLI", "instance B")[round_ % 3]
        for _ in range(300):
            try:
                if method == "raw SQL":
                    sql("DELETE FROM memberships WHERE couple_id = %s AND user_id = %s", (pair[0], pair[2]))
                    break
                if method == "CLI":
                    if rbac("revoke", "--couple", pair[0], "--user", pair[2]).returncode == 0:
                        break
                elif b_client.call("DELETE", f"/v1/couples/{pair[0]}/members/{pair[2]}",
                                   headers={"X-Acting-User": pair[1]})[0] == 200:
                    break
            except psycopg.Error:
                pass
            time.sleep(0.1)
        committed = now()
        denied_at = None
        while now() - committed < 3 and denied_at is None:
            with lock:
                denied_at = next((r for s, r, status, allowed in answers.get(round_, [])
                                  if s > committed and status == 200 and not allowed), None)
            time.sleep(0.001)
        with lock:
            seen = list(answers.get(round_, []))
        for sent, _, status, allowed in seen:
            if status is not None and status >= 500 and status != 503:
                errors += 1
            if allowed and sent > committed:
                worst = max(worst, sent - committed)
                stale += sent > committed + BOUND
        if denied_at is not None:
            lags.append(denied_at - committed)
        rounds += 1
    stop.set()
    for thread in threads:
        thread.join()
    for process in hogs:
        process.kill()
    figures = (f"{rounds} rounds, stale allows past {BOUND * 1000:.0f} ms: {stale}, "
               f"latest allow after commit {worst * 1000:.1f} ms, "
               f"commit-to-deny p50 {percentile(lags, 0.5) * 1000:.1f} ms p99 {percentile(lags, 0.99) * 1000:.1f} ms, "
               f"5xx but 503: {errors}, recovered in {', '.join(f'{r:.1f}' for r in recovery)} s")
    report("revocations under load and restarts", stale == 0 and errors == 0 and len(lags) == rounds, figures)


def feed_killed(key, a, b):
    pairs, stale = seed(20), 0
    client = Client(a.port, key)
    for couple, _, planner in pairs:
        while not client.check(couple, planner)[1]:
            time.sleep(0.01)
        client.check(couple, planner)
        with psycopg.connect(dbname=DB, autocommit=True) as connection:
            connection.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = 'rbac-change-feed' AND datname = current_database()")
            connection.execute("DELETE FROM memberships WHERE couple_id = %s AND user_id = %s", (couple, planner))
        committed = now()
        while now() - committed < 0.5:
            sent = now()
            stale += client.check(couple, planner)[1] and sent > committed + BOUND
    report("change feed killed, raw-SQL removal at once", stale == 0, f"20 rounds, stale allows: {stale}")


def race(n, body):
    """Runs body(i) in n threads released at once; returns their results."""
    barrier, results = threading.Barrier(n), [None] * n

    def run(i):
        barrier.wait()
        try:
            results[i] = body(i)
        except Exception as error:  # a loser's refusal is a result like any other
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def races(key, a, b):
    # Two owners removed at once.
    couples = seed(ROUNDS)
    with psycopg.connect(dbname=DB, autocommit=True) as connection:
        for couple, _, planner in couples:
            connection.execute("UPDATE memberships SET role = 'owner' WHERE couple_id = %s AND user_id = %s",
                               (couple, planner))

    def remove(method, couple, user):
        if method == "CLI":
            return rbac("revoke", "--couple", couple, "--user", user).returncode
        with psycopg.connect(dbname=DB, autocommit=True) as connection:
            if method == "raw SQL":
                return connection.execute("DELETE FROM memberships WHERE couple_id = %s AND user_id = %s",
                                          (couple, user)).rowcount
            return connection.execute("SELECT remove_member(%s, %s)", (couple, user)).rowcount

    for i, (couple, owner, planner) in enumerate(couples):
        method = ("raw SQL", "functions", "CLI")[i % 3]
        race(2, lambda j: remove(method, couple, (owner, planner)[j]))
    ownerless = sql("SELECT count(*) FROM couples c WHERE NOT EXISTS (SELECT 1 FROM memberships m "
                    "WHERE m.couple_id = c.id AND m.role = 'owner' AND m.status = 'active')", fetch=True)[0][0]
    report("two owners removed at once", ownerless == 0, f"{len(couples)} rounds, ownerless couples: {ownerless}")

    # One token, 20 clients.
    invitees = [sql("INSERT INTO users (email) VALUES (%s) RETURNING id::text", (f"{uuid.uuid4()}@example.com",),
                    fetch=True)[0][0] for _ in range(20)]
    couples = seed(ROUNDS)
    wrong = 0
    for couple, owner, _ in couples:
        status, body = Client(a.port, key, owner).call("POST", f"/v1/couples/{couple}/invitations", {"role": "viewer"})
        token = json.loads(body)["token"]
        race(20, lambda j: Client(a.port).call(
            "POST", f"/invitations/{token}/accept", b"",
            {"Authorization": f"Bearer {jwt(invitees[j])}", "Accept": "application/json"}))
        members = sql("SELECT count(*) FROM memberships WHERE couple_id = %s AND role = 'viewer'", (couple,),
                      fetch=True)[0][0]
        wrong += members != 1
    report("one token redeemed by 20 clients", wrong == 0, f"{len(couples)} rounds, rounds without exactly one "
           f"membership: {wrong}")

    # Accept against revoke: exactly one wins, and a membership exists exactly when the accept won.
    couples, disagree, examples = seed(ROUNDS), 0, []
    for i, (couple, owner, _) in enumerate(couples):
        status, body = Client(a.port, key, owner).call("POST", f"/v1/couples/{couple}/invitations", {"role": "viewer"})
        created = json.loads(body)
        token, invitation = created["token"], created["invitation"]["id"]
        sides = (
            lambda: Client(a.port).call("POST", f"/invitations/{token}/accept", b"",
                                        {"Authorization": f"Bearer {jwt(invitees[i % 20])}",
                                         "Accept": "application/json"}),
            lambda: Client(a.port, key, owner).call("DELETE", f"/v1/couples/{couple}/invitations/{invitation}"),
        )
        accepted, revoked = race(2, lambda j: sides[j]()[0])
        member = sql("SELECT count(*) FROM memberships WHERE couple_id = %s AND role = 'viewer'", (couple,),
                     fetch=True)[0][0]
        if (accepted == 200) == (revoked == 204) or (member == 1) != (accepted == 200):
            disagree += 1
            examples.append(f"accept {accepted}, revoke {revoked}, members {member}")
    report("accept against revoke", disagree == 0, f"{len(couples)} rounds, outcomes that disagree: {disagree} "
           f"{examples[:3]}")


def deadlocks(key, a, b):
    """Random triples of the collaboration functions, at once; a 40P01 is a lock order broken somewhere."""
    rounds, found, tally, seed_ = ROUNDS * 10, {}, {}, int.from_bytes(os.urandom(4), "big")
    draw = random.Random(seed_)  # printed, so that a failing run's triples can be drawn again
    connections = [psycopg.connect(dbname=DB, autocommit=True) for _ in range(3)]
    for connection in connections:
        connection.execute("SET deadlock_timeout = '100ms'")  # a deadlock costs this much before it is broken
    setup = connections[0]

    def user():
        email = f"{uuid.uuid4()}@example.com"
        return setup.execute("INSERT INTO users (email) VALUES (%s) RETURNING id", (email,)).fetchone()[0], email

    def acting(connection, who):
        claims = json.dumps({"sub": str(who)}) if who else ""
        connection.execute("SELECT set_config('request.jwt.claims', %s, true)", (claims,))

    def invite(actor, couple, email=None):
        token = os.urandom(32)
        with setup.transaction():
            acting(setup, actor)
            setup.execute("SELECT create_invitation(%s, %s, 'viewer', %s)", (couple, token, email))
        return token, setup.execute("SELECT id FROM invitations WHERE token_hash = %s", (token,)).fetchone()[0]

    for _ in range(rounds):
        (owner, _), (partner, _), (planner, _), (guest, guest_email), (other, _), (stranger, _) = (
            user() for _ in range(6))
        couple = setup.execute("SELECT (create_couple('Race', %s)).id", (owner,)).fetchone()[0]
        with setup.transaction():
            acting(setup, owner)
            setup.execute("SELECT grant_role(%s, %s, 'partner')", (couple, partner))
            setup.execute("SELECT grant_role(%s, %s, 'planner')", (couple, planner))
            setup.execute("SELECT * FROM create_couple_role(%s, 'mom', 'Family', ARRAY['budget.view'])", (couple,))
            setup.execute("SELECT grant_role(%s, %s, 'mom')", (couple, other))
        to_guest, to_guest_id = invite(partner, couple, guest_email)
        open_token, open_id = invite(owner, couple)
        invited_address = f"{uuid.uuid4()}@example.com"
        invite(owner, couple, invited_address)
        # Each a list of (SQL, arguments, who acts: None is the operator), one transaction each, in turn
        to_mom, to_stranger = os.urandom(32), os.urandom(32)
        calls = {
            "owner invites to mom, the guest accepts": [
                ("SELECT create_invitation(%s, %s, 'mom')", (couple, to_mom), owner),
                ("SELECT * FROM accept_invitation(%s)", (to_mom,), guest),
            ],
            "partner invites, a stranger accepts": [
                ("SELECT create_invitation(%s, %s, 'viewer')", (couple, to_stranger), partner),
                ("SELECT * FROM accept_invitation(%s)", (to_stranger,), stranger),
            ],
            "planner invites, then leaves": [
                ("SELECT create_invitation(%s, %s, 'viewer')", (couple, os.urandom(32)), planner),
                ("SELECT leave_couple(%s)", (couple,), planner),
            ],
            "delete the partner": [("SELECT delete_user(%s)", (partner,), partner)],
            "delete the planner": [("SELECT delete_user(%s)", (planner,), planner)],
            "delete the owner": [("SELECT delete_user(%s)", (owner,), None)],
            "delete the guest": [("SELECT delete_user(%s)", (guest,), guest)],
            "partner invites": [("SELECT create_invitation(%s, %s, 'viewer')", (couple, os.urandom(32)), partner)],
            "owner invites the guest": [("SELECT create_invitation(%s, %s, 'viewer', %s)",
                                         (couple, os.urandom(32), guest_email.upper()), owner)],
            "partner renames themself": [("SELECT edit_user(%s, NULL, 'Renamed')", (partner,), partner)],
            "guest's address changes": [("SELECT edit_user(%s, %s, NULL)", (guest, f"{uuid.uuid4()}@example.com"),
                                         None)],
            "planner's address changes": [("SELECT edit_user(%s, %s, NULL)",
                                           (planner, f"{uuid.uuid4()}@example.com"), None)],
            "planner takes an invited address": [("SELECT edit_user(%s, %s, NULL)", (planner, invited_address), None)],
            "owner grants the guest": [("SELECT grant_role(%s, %s, 'planner')", (couple, guest), owner)],
            "owner gives mom": [("SELECT grant_role(%s, %s, 'mom')", (couple, planner), owner)],
            "owner removes the planner": [("SELECT remove_member(%s, %s)", (couple, planner), owner)],
            "partner leaves": [("SELECT leave_couple(%s)", (couple,), partner)],
            "owner suspends the planner": [("SELECT suspend_member(%s, %s)", (couple, planner), owner)],
            "owner suspends the partner": [("SELECT suspend_member(%s, %s)", (couple, partner), owner)],
            "guest accepts": [("SELECT * FROM accept_invitation(%s)", (to_guest,), guest)],
            "guest accepts the open one": [("SELECT * FROM accept_invitation(%s)", (open_token,), guest)],
            "owner revokes the guest's": [("SELECT revoke_invitation(%s, %s)", (couple, to_guest_id), owner)],
            "partner resends the guest's": [("SELECT * FROM resend_invitation(%s, %s, %s)",
                                             (couple, to_guest_id, os.urandom(32)), partner)],
            "owner resends the open one": [("SELECT * FROM resend_invitation(%s, %s, %s)",
                                            (couple, open_id, os.urandom(32)), owner)],
            "owner hands over": [("SELECT transfer_ownership(%s, %s)", (couple, partner), owner)],
            "couple deleted": [("SELECT delete_couple(%s)", (couple,), owner)],
            "partner renames the couple": [("SELECT rename_couple(%s, 'Renamed')", (couple,), partner)],
            "guest signs in": [("SELECT * FROM sign_in('https://issuer.test', %s, %s, true, NULL)",
                                (str(uuid.uuid4()), guest_email), None)],
            "owner adds a role": [("SELECT * FROM create_couple_role(%s, 'dad', 'Family', ARRAY['guests.view'])",
                                   (couple,), owner)],
            "owner edits mom": [("SELECT * FROM edit_couple_role(%s, 'mom', NULL, ARRAY['guests.view'])", (couple,),
                                 owner)],
            "partner deletes mom": [("SELECT delete_couple_role(%s, 'mom', 'viewer')", (couple,), partner)],
            "owner sets domains": [("SELECT set_invite_domains(%s, ARRAY['example.com'])", (couple,), owner)],
            "owner reactivates the planner": [("SELECT reactivate_member(%s, %s)", (couple, planner), owner)],
            "mom leaves": [("SELECT leave_couple(%s)", (couple,), other)],
            "delete mom's holder": [("SELECT delete_user(%s)", (other,), other)],
        }
        names = draw.sample(sorted(calls), 3)

        def call(i):
            steps = calls[names[i]]
            for statement, arguments, who in steps:
                try:
                    with connections[i].transaction():
                        acting(connections[i], who)
                        connections[i].execute(statement, arguments)
                except psycopg.Error as error:
                    return error.sqlstate
            return None

        states = race(3, call)
        for state in states:
            tally[state] = tally.get(state, 0) + 1
        if "40P01" in states:
            found[tuple(sorted(names))] = found.get(tuple(sorted(names)), 0) + 1
    for connection in connections:
        connection.close()
    refused = sum(count for state, count in tally.items() if state and state.startswith("RB"))
    # Any other error is no rule's refusal either: a foreign key's, say, past a lock that should have held.
    others = {state: count for state, count in tally.items() if state and not state.startswith("RB")
              and state != "40P01"}
    report("deadlocks among random triples", not found and not others,
           f"{rounds} rounds (seed {seed_}), calls refused by the rules: {refused}, other errors: {others}, "
           f"deadlocked rounds: {sum(found.values())} {sorted(found.items(), key=lambda item: -item[1])[:3]}")


def sigterm_under_load(key, a, b):
    server = Server("sigterm", "--drain-timeout", "10s")
    (couple, _, planner), = seed(1)
    signalled, lost, answered = [None], [0], [0]
    lock, start = threading.Lock(), threading.Barrier(65)

    def client():
        c = Client(server.port, key)
        start.wait()
        while True:
            sent = now()
            status, _ = c.check(couple, planner)
            with lock:
                if status is None:
                    # Sent before the signal and not answered: lost. After it, a refusal is expected.
                    lost[0] += signalled[0] is None or sent < signalled[0]
                    return
                answered[0] += 1

    threads = [threading.Thread(target=client) for _ in range(64)]
    for thread in threads:
        thread.start()
    start.wait()
    time.sleep(2)
    with lock:
        signalled[0] = now()
    server.process.send_signal(signal.SIGTERM)
    status = server.process.wait(timeout=60)
    stopped = now() - signalled[0]
    for thread in threads:
        thread.join()
    report("SIGTERM under 64 connections", lost[0] == 0 and status == 0,
           f"{answered[0]} answered, lost: {lost[0]}, exit {status} after {stopped:.2f} s")


def bad_input(key, a, b):
    (couple, owner, _), = seed(1)
    scenario = Client(a.port, key, owner).call("POST", f"/v1/couples/{couple}/budget/scenarios", {"name": "Main"})
    scenario = json.loads(scenario[1])["id"]
    def dump():
        # Rows only: a refused insert may still have drawn a number from a sequence, which changes no data, and
        # pg_dump guards each dump with a random key of its own (\restrict).
        text = subprocess.run(["pg_dump", "--data-only", "--exclude-table=schema_migrations", DB],
                              capture_output=True, text=True, check=True).stdout
        return [line for line in text.splitlines()
                if not line.startswith(("SELECT pg_catalog.setval", "\\restrict", "\\unrestrict"))]

    before = dump()
    base = f"/v1/couples/{couple}"
    # Every one of these is refused wherever it goes (text that merely looks hostile, such as "'; DROP TABLE",
    # is a valid name, stored as given, and is not here).
    nasty = ["\u0000", "\u001b[2J", "\u0007", "a\r\nb", "\u007f", "x" * 400]
    requests = []
    for text in nasty:
        requests += [
            ("POST", f"{base}/invitations", {"role": "viewer", "email": f"a{text}b@example.com"}),
            ("POST", f"{base}/budget/scenarios", {"name": text}),
            ("POST", f"{base}/budget/expenses", {"name": "Cake", "amount": 10, "vendor": text}),
            ("POST", f"{base}/budget/expenses", {"name": text, "amount": 10}),
            ("POST", f"{base}/budget/gifts", {"from": text, "amount": 5}),
            ("POST", f"{base}/budget/scenarios/{scenario}/folders", {"name": text}),
            ("POST", "/v1/check", {"couple_id": couple, "user_id": owner, "permission": text}),
            ("POST", f"{base}/members", {"user_id": text, "role": "viewer"}),
            ("POST", f"{base}/members", {"user_id": owner, "role": text}),
        ]
    requests += [
        ("POST", "/v1/check", b"{"), ("POST", "/v1/check", b"\x00\xff\xfe"), ("POST", "/v1/check", b"[]"),
        ("POST", "/v1/check", {"couple_id": couple, "user_id": owner, "permission": "budget.edit",
                               "min_revision": -1}),
        ("POST", "/v1/check", {"couple_id": couple, "user_id": owner, "permission": "budget.edit",
                               "min_revision": 2 ** 62}),
        ("POST", "/v1/check/batch", {"checks": []}), ("POST", "/v1/check/batch", b" " * 70000),
        ("GET", "/v1/users/%00/couples", None), ("GET", f"{base}/members?limit=-1", None),
        ("GET", f"{base}/members?after=%zz", None), ("GET", f"{base}/invitations?status=%1b", None),
        ("GET", "/invitations/inv_%00", None), ("POST", "/invitations/inv_x/accept", b"access_token=%zz%"),
        ("PATCH", f"{base}/budget/scenarios/{scenario}", {"name": None}),
        ("PUT", f"{base}/budget/items/{uuid.uuid4()}/budgeted", {"amount": "1e309"}),
        # Addresses a mail header would read as two, or that no server delivers to.
        ("POST", f"{base}/invitations", {"role": "viewer", "email": "a>,<b@example.com"}),
        ("POST", f"{base}/invitations", {"role": "viewer", "email": "a..b@example.com"}),
    ]
    # Checks, users and member listings answer for the service key alone and refuse an acting user; each request
    # goes where it is refused for its input, not for that.
    acting, key_alone, server_errors, statuses = Client(a.port, key, owner), Client(a.port, key), 0, {}
    for method, path, body in requests:
        alone = path.startswith(("/v1/check", "/v1/users")) or (method == "GET" and "/members" in path)
        for content_type in ("application/json", "text/plain"):
            headers = {"Content-Type": content_type}
            if path.endswith("/accept"):
                headers = {"Content-Type": "application/x-www-form-urlencoded"}
            status, _ = (key_alone if alone else acting).call(method, path, body, headers)
            statuses[status] = statuses.get(status, 0) + 1
            server_errors += status is None or status >= 500
    password = "S3cretPw"
    cli = [
        ["users", "add", "--email", "eve\u001b]0;x\u0007@example.com"],
        ["users", "add", "--email", "eve@example.com", "--name", "Eve\u001b[2J"],
        ["couples", "create", "--name", "A\u0007", "--owner-email", "a@example.com"],
        ["keys", "create", "--name", "k\u001b[31m"],
        ["grant", "--couple", couple, "--user", "x\u001b@example.com", "--role", "viewer"],
        ["grant", "--couple", "not-a-uuid", "--user", owner, "--role", "viewer"],
        ["invite", "--couple", couple, "--role", "viewer", "--email", "a\u0001b@example.com"],
        ["invite", "--couple", couple, "--role", "viewer", "--email", "a>,<b@example.com"],
        ["check", "--couple", couple, "--user", owner, "--permission", "budget"],
        ["couples", "list", "--database-url", f"postgres://bob:{password}@[::1"],
        ["couples", "list", "--database-url", f"host=/nonexistent password={password}"],
        ["couples", "list", "--databse-url", f"postgres://bob:{password}@h/x"],
        ["couples", "list\u001b[2J"],
    ]
    crashes, echoed, succeeded = 0, 0, 0
    for arguments in cli:
        result = rbac(*arguments)
        crashes += result.returncode < 0 or result.returncode > 5
        succeeded += result.returncode == 0
        echoed += password in result.stdout + result.stderr or "\u001b" in result.stdout + result.stderr
    after = dump()
    unchanged = before == after
    if not unchanged:
        print("\n".join(sorted(set(after) ^ set(before))[:10]), flush=True)
    report("bad-input corpus", server_errors == 0 and crashes == 0 and echoed == 0 and succeeded == 0 and unchanged,
           f"{2 * len(requests)} requests, 5xx: {server_errors}, statuses {dict(sorted(statuses.items(), key=str))}; "
           f"{len(cli)} commands, crashes: {crashes}, accepted: {succeeded}, secrets or escapes echoed: {echoed}; "
           f"data {'unchanged' if unchanged else 'CHANGED'}")


class Forwarder:
    """A TCP port that passes each connection on to PostgreSQL's: the network between instance C and it."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(("127.0.0.1", int(os.environ["PGPORT"])))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self.pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def can_drop_packets():
    return os.getuid() == 0 and shutil.which("iptables") and subprocess.run(
        ["iptables", "-L", "-n"], capture_output=True).returncode == 0


@contextlib.contextmanager
def dropped(forwarder):
    """Drops the packets to and from the forwarder's port, on loopback (its instance's connections, and nothing
    else), until the block ends."""
    rules = [["INPUT", "-i", "lo", "-p", "tcp", f"--{end}", str(forwarder.port), "-j", "DROP"]
             for end in ("dport", "sport")]
    inserted = []
    try:
        for rule in rules:
            subprocess.run(["iptables", "-I", *rule], check=True)
            inserted.append(rule)
        yield
    finally:
        for rule in inserted:
            subprocess.run(["iptables", "-D", *rule], check=True)


def black_hole(key, a, b):
    name = "a black-holed database"
    if not can_drop_packets():
        return skip(name, "needs root and a working iptables to drop packets")
    forwarder = Forwarder()
    server = Server("black-hole", env=dict(ENV, DATABASE_URL=f"host=127.0.0.1 port={forwarder.port} dbname={DB}"))
    (couple, _, planner), = seed(1)
    samples, lock, stop = [], threading.Lock(), threading.Event()

    def client():
        c = Client(server.port, key, timeout=3 * HOLE)
        while not stop.is_set():
            sent = now()
            status, _ = c.check(couple, planner)
            with lock:
                samples.append((sent, now(), status))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    holed = now()
    with dropped(forwarder):
        time.sleep(HOLE)
    restored = now()
    while now() < restored + 2 * HOLE and not any(sent >= restored and status == 200 for sent, _, status in samples):
        time.sleep(0.1)
    # The change feed's connection was idle in the hole, which keepalives end: the cache answers again once the
    # feed has listened anew and heard its heartbeat.
    metrics = Client(server.port)
    line = re.compile(rb'^rbac_operations_total\{[^}]*outcome="cached"[^}]*\} (\S+)', re.M)

    def cached_checks():
        return sum(float(count) for count in line.findall(metrics.call("GET", "/metrics")[1] or b""))

    before = cached_checks()
    while now() < restored + 2 * HOLE and cached_checks() == before:
        time.sleep(0.1)
    feed_back = now() - restored if cached_checks() > before else float("inf")
    stop.set()
    for thread in threads:
        thread.join()
    server.stop()
    # How long each check answered after the hole began had waited inside it.
    waits = [answered - max(sent, holed) for sent, answered, _ in samples if answered > holed and sent < restored]
    again = [answered for sent, answered, status in samples if sent >= restored and status == 200]
    recovered = min(again) - restored if again else float("inf")
    errors = sum(status is None or status >= 500 and status != 503 for _, _, status in samples)
    longest = max(waits, default=float("inf"))
    # A check is asked once, before the router or by its route, never by both (nor is its key looked up again), and
    # a connection gone quiet takes the pool's idle ones with it: a check waits at the most for the batch ahead of
    # it on that connection (15 s, tcp_user_timeout), then for its own opening one (10 s, connect_timeout).
    # Without those settings a check waits out the hole, and beyond.
    report(name, longest <= 30 and recovered <= 10 and feed_back <= 15 and errors == 0,
           f"{HOLE} s dropped, {len(waits)} checks answered in it, the longest after {longest:.1f} s; "
           f"answered again {recovered:.1f} s after, from the cache {feed_back:.1f} s after; errors but 503: {errors}")


def sigterm_in_black_hole(key, a, b):
    name = "SIGTERM with the database black-holed"
    if not can_drop_packets():
        return skip(name, "needs root and a working iptables to drop packets")
    forwarder = Forwarder()
    server = Server("hole-sigterm", "--drain-timeout", "2s",
                    env=dict(ENV, DATABASE_URL=f"host=127.0.0.1 port={forwarder.port} dbname={DB}"))
    (couple, _, planner), = seed(1)
    # The key's use, which serve records as it stops: in the hole, a statement waits 15 s (tcp_user_timeout).
    checked, _ = Client(server.port, key).check(couple, planner)
    with dropped(forwarder):
        signalled = now()
        status = server.stop()
        stopped = now() - signalled
    report(name, checked == 200 and status == 0 and stopped <= 4,
           f"exit {status} after {stopped:.1f} s (--drain-timeout 2s)")


def keyed_changes_through_restarts(key, a, b):
    name = "keyed payments through restarts"
    # Commits reach the kernel before they are answered, as on a production server, so that the immediate
    # restart loses none (the disposable cluster does not wait for them); its connections pick it up as the first
    # restart makes them anew.
    sql(f"ALTER DATABASE {DB} SET synchronous_commit = on")
    duration = max(SECONDS / 4, 10)
    expenses = []
    for couple, owner, _ in seed(8):
        status, body = Client(a.port, key, owner).call(
            "POST", f"/v1/couples/{couple}/budget/expenses", {"name": "Venue", "amount": 1000000})
        if status != 201:
            raise SystemExit(f"reliability: could not make an expense: {status} {body[:200]}")
        expenses.append((couple, owner, json.loads(body)["id"]))
    answered, odd, unanswered, unknown = {}, [], [0], set()  # answered: amount -> (path, acting, key, body)
    resent = {"unavailable": 0, "running": 0}  # why a payment was sent again
    lock, stop = threading.Lock(), threading.Event()

    def payer(i):
        couple, owner, expense = expenses[i]
        path = f"/v1/couples/{couple}/budget/expenses/{expense}/payments"
        clients = [Client(a.port, key, owner, timeout=5), Client(b.port, key, owner, timeout=5)]
        for n in itertools.count(1):
            if stop.is_set():
                return
            # As PostgreSQL shows numeric(12, 2), and unique: the payment's name.
            amount, idempotency_key = f"{i * 1000000 + n}.01", f"pay-{i}-{n}"
            given_up = now() + 60
            for attempt in itertools.count():
                status, body = clients[attempt % 2].call(
                    "POST", path, {"amount": float(amount)}, headers={"Idempotency-Key": idempotency_key})
                if status == 201:
                    with lock:
                        answered[amount] = (path, owner, idempotency_key, body)
                    break
                if status == 409 and b"outcome_unknown" in body:
                    with lock:
                        unknown.add(amount)
                    break
                with lock:
                    if status in (None, 503):
                        resent["unavailable"] += 1
                    elif status == 409 and b"idempotency_key_in_use" in body:
                        resent["running"] += 1
                    else:
                        odd.append((status, body[:200]))
                if now() > given_up:
                    with lock:
                        unanswered[0] += 1
                    break
                time.sleep(0.1)

    threads = [threading.Thread(target=payer, args=(i,), daemon=True) for i in range(len(expenses))]
    for thread in threads:
        thread.start()
    start = now()
    for mode, at in (("fast", 0.3), ("immediate", 0.6)):
        time.sleep(max(0, start + duration * at - now()))
        restart_postgres(mode)
    time.sleep(max(0, start + duration - now()))
    stop.set()
    for thread in threads:
        thread.join()
    sql(f"ALTER DATABASE {DB} RESET synchronous_commit")
    made = dict(sql("SELECT amount::text, count(*) FROM expense_payments WHERE expense_id = ANY (%s::uuid[]) "
                    "GROUP BY amount", ([expense for _, _, expense in expenses],), fetch=True))
    twice = sum(1 for count in made.values() if count > 1)
    missing = sum(1 for amount in answered if amount not in made)
    differ = 0
    client = Client(a.port, key)
    for amount, (path, owner, idempotency_key, body) in answered.items():
        status, again = client.call("POST", path, {"amount": float(amount)},
                                    headers={"Idempotency-Key": idempotency_key, "X-Acting-User": owner})
        differ += status != 201 or again != body
    report(name, answered and not twice and not missing and not differ and not odd and not unanswered[0],
           f"{len(answered)} payments answered, sent again after no answer or 503: {resent['unavailable']}, "
           f"after 409 running: {resent['running']}; outcome unknown: {len(unknown)} (made: "
           f"{sum(1 for amount in unknown if amount in made)}); made twice: {twice}, answered but missing: {missing}, "
           f"replays that differ: {differ}, given up: {unanswered[0]}, other answers: {len(odd)} {odd[:2]}")


def webhooks_through_kills(key, a, b):
    """Last of the scenarios: the endpoint it adds is sent a message for every change made after it."""
    name = "webhooks through kills and restarts"
    root = os.path.join(CLUSTER, "webhooks")
    subprocess.run(["scripts/test-ca", root], check=True)
    inbox, ca = os.path.join(root, "inbox"), os.path.join(root, "ca.pem")
    os.makedirs(inbox)
    # One request in ten is answered after 0.3 s, so that kills find requests on their way.
    with open(os.path.join(inbox, "statuses"), "w") as statuses:
        statuses.write("".join("sleep 0.3\n" if i % 10 == 0 else "204\n" for i in range(5000)))
    receiver = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "..", "tools", "webhook_receiver.py"), os.path.join(root, "server.pem"),
         os.path.join(root, "server.key"), inbox], stdout=subprocess.PIPE, text=True,
        # Where it says which connections a killed worker cut.
        stderr=open(os.path.join(CLUSTER, "reliability-receiver.log"), "w"))
    Server.started.append(receiver)
    port = int(receiver.stdout.readline())
    with open(os.path.join(root, "delivery.key"), "w") as delivery_key:
        delivery_key.write(os.urandom(32).hex())
    keyed = ["--delivery-key-file", os.path.join(root, "delivery.key"), "--ca-file", ca]
    added = rbac("webhooks", "add", "--url", f"https://localhost:{port}/hooks", "--json", *keyed[:2])
    with open(os.path.join(inbox, "secret"), "w") as secret:
        secret.write(json.loads(added.stdout)["secret"])
    # The endpoint's messages: the outbox holds the earlier scenarios' invitation emails as well.
    endpoint = json.loads(added.stdout)["endpoint"]["id"]

    pairs, stop = seed(20), threading.Event()

    def changer():
        """Moves planners between two roles, each a membership.updated, through the restarts."""
        connection = None
        while not stop.is_set():
            try:
                connection = connection or psycopg.connect(dbname=DB, autocommit=True)
                couple, _, planner = random.choice(pairs)
                connection.execute("SELECT grant_role(%s, %s, %s)",
                                   (couple, planner, random.choice(["viewer", "planner"])))
            except psycopg.Error:
                connection = None
                time.sleep(0.1)
            time.sleep(0.005)

    log = open(os.path.join(CLUSTER, "reliability-deliver.log"), "w")

    def worker():
        process = subprocess.Popen([RBAC, "deliver", *keyed], env=ENV, stdout=log, stderr=subprocess.STDOUT)
        Server.started.append(process)
        return process, now()

    kills, odd_exits, slowest = {"SIGKILL": 0, "SIGTERM": 0}, [], [0.0]

    def end(process, how):
        """Signals a worker and waits for it: SIGTERM must end it with 0, soon."""
        signalled = now()
        process.send_signal(how)
        status = process.wait(timeout=60)
        kills[how.name] += 1
        if how == signal.SIGTERM:
            slowest[0] = max(slowest[0], now() - signalled)
            if status != 0:
                odd_exits.append(f"{status} after SIGTERM")

    changing = threading.Thread(target=changer, daemon=True)
    changing.start()
    workers = [worker(), worker()]
    duration = max(SECONDS / 4, 10)
    start, restarts = now(), [("fast", 0.3), ("immediate", 0.6)]
    while now() < start + duration:
        time.sleep(random.uniform(0.2, 0.6))
        for i, (process, started) in enumerate(workers):
            # Not even one started while PostgreSQL restarts: it waits for the database.
            if process.poll() is not None:
                odd_exits.append(f"{process.returncode} on its own")
                workers[i] = worker()
        i = random.randrange(len(workers))
        process, started = workers[i]
        # Signals are trapped once its command runs, a moment after it starts; a second is well past that.
        if now() - started > 1 and process.poll() is None:
            end(process, random.choice([signal.SIGKILL, signal.SIGTERM]))
            workers[i] = worker()
        if restarts and now() - start >= duration * restarts[0][1]:
            restart_postgres(restarts.pop(0)[0])
    stop.set()
    changing.join()
    for process, started in workers:
        time.sleep(max(0, started + 1 - now()))
        if process.poll() is None:
            end(process, signal.SIGTERM)

    # What the workers killed with SIGKILL held waits out their leases (a minute, in life); retries their waits.
    pending = None
    for _ in range(20):
        sql("UPDATE outbox SET next_attempt_at = now() WHERE status = 'pending' AND endpoint_id = %s", (endpoint,))
        rbac("deliver", "--once", *keyed)
        pending = sql("SELECT count(*) FROM outbox WHERE status = 'pending' AND endpoint_id = %s", (endpoint,),
                      fetch=True)[0][0]
        if pending == 0:
            break
    receiver.kill()
    receiver.wait()
    outbox = dict(sql("SELECT id::text, event_type FROM outbox WHERE endpoint_id = %s", (endpoint,), fetch=True))
    dead = sql("SELECT count(*) FROM outbox WHERE status = 'dead' AND endpoint_id = %s", (endpoint,), fetch=True)[0][0]
    with open(os.path.join(inbox, "received.jsonl")) as received:
        # A line the kill cut short is not read.
        deliveries = [json.loads(line) for line in received if line.endswith("\n")]
    unverified = sum(1 for delivery in deliveries if not delivery["verified"])
    arrived = {delivery["id"] for delivery in deliveries if delivery["verified"]}
    missing = len(set(outbox) - arrived)
    foreign = len(arrived - set(outbox))
    mistyped = sum(1 for delivery in deliveries
                   if delivery["verified"] and delivery["type"] != outbox.get(delivery["id"]))
    report(name, outbox and not pending and not dead and not missing and not foreign and not unverified
           and not mistyped and not odd_exits and slowest[0] <= 5,
           f"{len(outbox)} messages, {len(deliveries)} deliveries ({len(deliveries) - len(arrived)} again); "
           f"pending after: {pending}, dead: {dead}, never arrived: {missing}, unknown ids: {foreign}, unverified: "
           f"{unverified}, wrong type: {mistyped}; workers killed {kills['SIGKILL']}, stopped {kills['SIGTERM']} "
           f"(slowest {slowest[0]:.1f} s), other exits: {len(odd_exits)} {odd_exits[:3]}")


def main():
    subprocess.run(["createdb", DB], check=True)
    subprocess.run([RBAC, "migrate"], env=ENV, check=True, stdout=subprocess.DEVNULL)
    key = json.loads(rbac("keys", "create", "--name", "reliability", "--json").stdout)["secret"]
    try:
        a = Server("a", "--max-staleness", f"{int(BOUND * 1000)}ms")
        b = Server("b")
        print(f"reliability: {SECONDS} s of revocations under load, {ROUNDS} rounds of each race", flush=True)
        # ONLY=name runs the scenarios whose function name contains it (ONLY=races), for working on one.
        only = os.environ.get("ONLY", "")
        for scenario in (revocations_under_load, feed_killed, races, sigterm_under_load, bad_input, deadlocks,
                         black_hole, sigterm_in_black_hole, keyed_changes_through_restarts, webhooks_through_kills):
            if only in scenario.__name__:
                scenario(key, a, b)
        a.stop()
        b.stop()
    finally:
        for process in Server.started:
            if process.poll() is None:
                process.kill()
    print(f"reliability: {reported[0] - len(failures)} passed, {len(failures)} failed"
          + (f", {len(skipped)} skipped" if skipped else ""), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
