import Foundation
import Postgres
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Expiring memberships, couples' own roles and the sweep, through the built `rbac`.
extension CLITests {
    @Test("grant --until and --expires: the expiry is listed; both at once, a past one, or an owner's exit 2")
    func expiringGrant() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            #expect(try await run(["users", "add", "--email", "pia@example.com"]).status == 0)
            let pia = ["--couple", couple, "--user", "pia@example.com"]
            let granted = try await run(
                ["grant"] + pia + ["--role", "planner", "--until", "2099-09-30T18:00Z", "--json"])
            #expect(granted.status == 0, "\(granted.stderr)")
            #expect(try Self.json(granted)["expires_at"] as? String == "2099-09-30T18:00:00Z")
            let members = try await run(["members", "--couple", couple])
            #expect(members.stdout.contains("EXPIRES") && members.stdout.contains("2099-09-30T18:00:00Z"))
            let relative = try await run(["grant"] + pia + ["--role", "planner", "--expires", "90d", "--json"])
            let relativeExpiry = try #require(try Self.json(relative)["expires_at"] as? String)
            let expires = try #require(ISO8601DateFormatter().date(from: relativeExpiry))
            #expect(abs(expires.timeIntervalSinceNow - 90 * 86_400) < 120, "90 days from now")

            let both = try await run(
                ["grant"] + pia + ["--role", "planner", "--expires", "1d", "--until", "2099-01-01"])
            #expect(both.status == 2 && both.stderr.contains("--expires or --until, not both"), "\(both.stderr)")
            let past = try await run(["grant"] + pia + ["--role", "viewer", "--until", "2001-01-01"])
            #expect(past.status == 2)
            #expect(past.stderr.contains("the expiry 2001-01-01 00:00:00 UTC is not in the future"), "\(past.stderr)")
            // Before 1582 Foundation's calendar is Julian; the instant is read in the database's, days apart.
            let ancient = try await run(["grant"] + pia + ["--role", "viewer", "--until", "1000-03-01T12:00Z"])
            #expect(ancient.stderr.contains("the expiry 1000-03-01 12:00:00 UTC is not"), "\(ancient.stderr)")
            let zero = try await run(["grant"] + pia + ["--role", "viewer", "--expires", "0d"])
            #expect(zero.status == 2 && zero.stderr.contains("--expires must be at least 1m, not 0d"), "\(zero.stderr)")
            // A value that starts with a dash is still the option's value, refused as itself.
            let negative = try await run(["grant"] + pia + ["--role", "viewer", "--expires", "-1d"])
            #expect(
                negative.status == 2 && negative.stderr.contains("The value '-1d' is invalid for '--expires"),
                "\(negative.stderr)")
            let owner = try await run(["grant"] + pia + ["--role", "owner", "--expires", "1d"])
            #expect(owner.status == 2 && owner.stderr.contains("owner's membership cannot expire"), "\(owner.stderr)")
            // Refused saying what an instant looks like: a time without its zone would be read in whose?
            for garbled in ["next tuesday", "2099-09-30T18:00"] {
                let refused = try await run(["grant"] + pia + ["--role", "viewer", "--until", garbled])
                #expect(
                    refused.status == 2
                        && refused.stderr.contains(
                            "--until must be an ISO 8601 instant with a zone (2026-09-30T18:00Z) or a date (midnight "
                                + "UTC), not \"\(garbled)\""),
                    "\(refused.stderr)")
            }
            // An option of one value given twice is ambiguous: refused, where ArgumentParser would take the last.
            let twice = try await run(["grant"] + pia + ["--role", "owner", "--role=viewer"])
            #expect(
                twice.status == 2 && twice.stderr.contains("--role is given twice: give it once (it takes one value)"),
                "\(twice.stderr)")
            let flagTwice = try await run(["grant"] + pia + ["--role", "viewer", "--json", "--json"])
            #expect(
                flagTwice.status == 2 && flagTwice.stderr.contains(#""code":"invalid_input""#)
                    && flagTwice.stderr.contains(#""message":"--json is given twice: give it once""#),
                "\(flagTwice.stderr)")
            let listed = try Self.jsonArray(try await run(["members", "--couple", couple, "--json"]))
            let planner = try #require(listed.first { ($0["role"] as? String) == "planner" })
            #expect(planner["expires_at"] as? String == relativeExpiry)
            #expect(planner["status"] as? String == "active", "refusals changed nothing")
            // The audit log says until when: in the summary, and in the rows --json prints as objects.
            let audit = try await run(["audit", "--couple", couple, "--tail", "1"])
            #expect(audit.stdout.contains(" membership.update  user_id="), "\(audit.stdout)")
            #expect(audit.stdout.contains(" expires_at 2099-09-30T18:00:00Z→"), "as members prints it: \(audit.stdout)")
            let entry = try #require(try Self.jsonArray(try await run(["audit", "--couple", couple, "--json"])).last)
            let before = try #require(entry["before"] as? [String: Any], "an object, not a string of JSON")
            #expect(before["expires_at"] as? String == "2099-09-30T18:00:00+00:00")
            #expect((entry["after"] as? [String: Any])?["role"] as? String == "planner")
            // --since reads instants as --until does: a date alone is midnight UTC; one that does not exist is refused.
            let all = try Self.jsonArray(
                try await run(["audit", "--couple", couple, "--since", "2001-01-01", "--json"]))
            #expect(all.count >= 2 && all.last?["id"] as? Int == entry["id"] as? Int)
            let none = try Self.jsonArray(
                try await run(["audit", "--couple", couple, "--since", "2099-01-01T00:00Z", "--json"]))
            #expect(none.isEmpty)
            let unreal = try await run(["audit", "--couple", couple, "--since", "2026-02-30T00:00:00Z"])
            #expect(
                unreal.status == 2
                    && unreal.stderr.contains(#"--since "2026-02-30" is not a date: 2026-02 has days 01 to 28"#),
                "\(unreal.stderr)")
        }
    }

    @Test(
        """
        a command waits at most 10 s for a lock another session holds, then exits 5 having changed nothing; a \
        lock_timeout in PGOPTIONS or the URL's options replaces that
        """)
    func boundedLockWaits() async throws {
        try await Self.withDatabase { run, configuration in
            let couple = try await Self.createCouple(run)
            #expect(try await run(["users", "add", "--email", "pia@example.com"]).status == 0)
            let grant = ["grant", "--couple", couple, "--user", "pia@example.com", "--role", "planner"]
            func members() async throws -> Int {
                try Self.jsonArray(try await run(["members", "--couple", couple, "--json"])).count
            }
            let (holder, watcher) = (
                try await PostgresConnection.connect(configuration), try await PostgresConnection.connect(configuration)
            )
            try await ensuring {
                // As a session left open in psql would hold it.
                try await holder.runScript("BEGIN")
                try await holder.query("SELECT id FROM couples WHERE id = \(UUID(uuidString: couple)) FOR UPDATE")
                let refused = try await run(grant)
                #expect(refused.status == 5, "\(refused.stderr)")
                #expect(
                    refused.stderr.contains("waited too long for a lock that another change or session holds")
                        && refused.stderr.contains("pg_stat_activity"), "\(refused.stderr)")
                #expect(try await members() == 1, "the grant changed nothing")
                // Told to wait a minute, the grant waits past the 10 s, and is made once the lock goes. (Not for
                // ever: should this test fail before letting the lock go, the grant must still end.)
                async let waited = Self.rbac(
                    grant, database: configuration.connectionString, environment: ["PGOPTIONS": "-c lock_timeout=60s"])
                let pastDefault = try await eventually(within: .seconds(60), every: .milliseconds(200)) {
                    try await watcher.query(
                        """
                        SELECT count(*)::int AS waiting FROM pg_stat_activity
                        WHERE datname = current_database() AND wait_event_type = 'Lock'
                          AND clock_timestamp() - query_start > interval '11 seconds'
                        """)[0].decode("waiting", as: Int.self) == 1
                }
                #expect(pastDefault, "the grant waits beyond 10 s")
                try await holder.runScript("ROLLBACK")
                let granted = try await waited
                #expect(granted.status == 0, "\(granted.stderr)")
            } finally: {
                try? await holder.runScript("ROLLBACK")
                await holder.close()
                await watcher.close()
            }
            #expect(try await members() == 2)
        }
    }

    @Test("roles create, list, grant, edit, delete --reassign: a couple's own role end to end")
    func coupleRoles() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            #expect(try await run(["users", "add", "--email", "mom@example.com"]).status == 0)
            let created = try await run([
                "roles", "create", "--couple", couple, "--name", "mom", "--description", "Sees the guests and budget",
                "--permission", "guests.view", "--permission", "budget.view", "--json",
            ])
            #expect(created.status == 0, "\(created.stderr)")
            #expect(try Self.json(created)["permissions"] as? [String] == ["budget.view", "guests.view"])
            let listed = try Self.jsonArray(try await run(["roles", "--couple", couple, "--json"]))
            #expect(listed.map { $0["name"] as? String } == ["owner", "partner", "planner", "viewer", "mom"])
            #expect(listed.last?["couple_defined"] as? Bool == true)
            #expect(try await run(["roles"]).stdout.contains("MAY GIVE"), "without --couple, the policy's roles")

            let mom = ["--couple", couple, "--user", "mom@example.com"]
            #expect(try await run(["grant"] + mom + ["--role", "mom"]).status == 0)
            #expect(try await run(["check"] + mom + ["--permission", "guests.view"]).status == 0)
            #expect(try await run(["check"] + mom + ["--permission", "guests.edit"]).status == 1)
            let edited = try await run([
                "roles", "edit", "--couple", couple, "--name", "mom", "--permission", "guests.edit",
            ])
            #expect(edited.status == 0, "\(edited.stderr)")
            #expect(try await run(["check"] + mom + ["--permission", "guests.edit"]).status == 0)
            #expect(try await run(["check"] + mom + ["--permission", "guests.view"]).status == 1)
            let nothing = try await run(["roles", "edit", "--couple", couple, "--name", "mom"])
            #expect(nothing.status == 2 && nothing.stderr.contains("--description, --permission"), "\(nothing.stderr)")
            let both = try await run([
                "roles", "edit", "--couple", couple, "--name", "mom", "--permission", "guests.view", "--no-permissions",
            ])
            #expect(both.status == 2 && both.stderr.contains("cannot go together"), "\(both.stderr)")
            #expect(try await run(["check"] + mom + ["--permission", "guests.edit"]).status == 0, "nothing changed")
            let emptied = try await run(["roles", "edit", "--couple", couple, "--name", "mom", "--no-permissions"])
            #expect(emptied.status == 0, "\(emptied.stderr)")
            #expect(try await run(["check"] + mom + ["--permission", "guests.edit"]).status == 1)
            #expect(try await run(["members", "--couple", couple]).stdout.contains("mom"), "Mom keeps the role")
            let taken = try await run([
                "roles", "create", "--couple", couple, "--name", "viewer", "--description", "x",
            ])
            #expect(taken.status == 4 && taken.stderr.contains("is a role of the policy"), "\(taken.stderr)")
            // Nor the other way round: a policy naming a role as the couple did is refused for what the database
            // holds (exit 4), not as a bad document.
            let policies = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("policies"), to: policies)
            defer { try? FileManager.default.removeItem(at: policies) }
            let policy = policies.appendingPathComponent("policy.json")
            try String(contentsOf: policy, encoding: .utf8).replacingOccurrences(
                of: #""roles": {"#, with: #""roles": {"mom": {"rank": 5, "description": "Mum", "permissions": []},"#
            ).write(to: policy, atomically: true, encoding: .utf8)
            let clash = try await run(["policy", "apply", "--dir", policies.path])
            #expect(
                clash.status == 4 && clash.stderr.contains(#"role "mom" is the name of a role 1 couple(s) defined"#),
                "\(clash.stderr)")
            // 501 Unicode scalars, as the table counts, though only 251 characters to Swift.
            let wordy = try await run([
                "roles", "edit", "--couple", couple, "--name", "mom", "--description", accented(501),
            ])
            #expect(
                wordy.status == 2 && wordy.stderr.contains("a role's description must be 1 to 500 characters"),
                "\(wordy.stderr)")

            let held = try await run(["roles", "delete", "--couple", couple, "--name", "mom"])
            #expect(held.status == 4 && held.stderr.contains("--reassign"), "\(held.stderr)")
            let moved = try await run(["roles", "delete", "--couple", couple, "--name", "mom", "--reassign", "viewer"])
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(try await run(["check"] + mom + ["--permission", "guests.view"]).status == 0, "now a viewer")
            let audit = try await run(["audit", "--couple", couple])
            #expect(audit.stdout.contains("couple_role.insert") && audit.stdout.contains("couple_role.delete"))
        }
    }

    @Test("check --explain says why: the role and what it grants, a suspension, an expiry, no membership")
    func explainedCheck() async throws {
        try await Self.withDatabase { run, configuration in
            let couple = try await Self.createCouple(run)
            for email in ["pia@example.com", "vera@example.com"] {
                #expect(try await run(["users", "add", "--email", email]).status == 0)
            }
            #expect(
                try await run(["grant", "--couple", couple, "--user", "pia@example.com", "--role", "viewer"]).status
                    == 0)
            func explain(_ user: String, _ permission: String, couple: String = couple) async throws -> (Int32, String)
            {
                let result = try await run([
                    "check", "--couple", couple, "--user", user, "--permission", permission, "--explain",
                ])
                return (result.status, result.stdout)
            }
            let expectations: [(String, String, Int32, String)] = [
                (
                    "pia@example.com", "budget.view", 0,
                    "allowed: pia@example.com holds role viewer in the couple, which grants budget.view"
                ),
                (
                    "pia@example.com", "budget.edit", 1,
                    "denied: pia@example.com holds role viewer in the couple, which does not grant budget.edit; owner, partner, planner do"
                ),
                (
                    "vera@example.com", "couple.delete", 1,
                    "denied: vera@example.com is not a member of the couple; owner does"
                ),
            ]
            for (user, permission, status, line) in expectations {
                #expect(try await explain(user, permission) == (status, line + "\n"))
            }
            let unknown = UUID().uuidString.lowercased()
            #expect(
                try await explain("pia@example.com", "budget.view", couple: unknown) == (
                    1, "denied: couple \(unknown) does not exist\n"
                ))

            #expect(try await run(["suspend", "--couple", couple, "--user", "pia@example.com"]).status == 0)
            #expect(
                try await explain("pia@example.com", "budget.view")
                    == (
                        1,
                        "denied: pia@example.com holds role viewer in the couple, suspended: rbac reactivate restores it\n"
                    ))
            #expect(try await run(["reactivate", "--couple", couple, "--user", "pia@example.com"]).status == 0)
            let admin = try await PostgresConnection.connect(configuration)
            _ = try await admin.execute(
                "UPDATE memberships SET expires_at = '2026-01-01T00:00:00Z' WHERE role = 'viewer'")
            await admin.close()
            #expect(
                try await explain("pia@example.com", "budget.view")
                    == (
                        1,
                        "denied: pia@example.com held role viewer in the couple until 2026-01-01T00:00:00Z (rbac grant renews it)\n"
                    ))
            let json = try Self.json(
                try await run([
                    "check", "--couple", couple, "--user", "olivia@example.com", "--permission", "budget.edit",
                    "--explain", "--json",
                ]))
            #expect(
                json["allowed"] as? Bool == true && json["revision"] is Int
                    && (json["reason"] as? String)?.contains("owner") == true)
        }
    }

    @Test("sweep records each expiry once, deletes outbox messages kept long enough, and says how many")
    func sweep() async throws {
        try await Self.withDatabase { run, configuration in
            let couple = try await Self.createCouple(run)
            for email in ["pia@example.com", "ivy@example.com"] {
                #expect(try await run(["users", "add", "--email", email]).status == 0)
                let grant = ["grant", "--couple", couple, "--user", email, "--role", "planner", "--expires", "1d"]
                #expect(try await run(grant).status == 0)
            }
            #expect(try await run(["keys", "create", "--name", "billing"]).status == 0)
            let admin = try await PostgresConnection.connect(configuration)
            _ = try await admin.execute(
                "UPDATE memberships SET expires_at = now() - interval '1 minute' WHERE expires_at IS NOT NULL")
            // Answers kept for an Idempotency-Key, two days and two hours ago: a day is kept.
            _ = try await admin.execute(
                """
                INSERT INTO idempotent_requests (key_id, idempotency_key, fingerprint, claim, status, created_at)
                SELECT id, ago::text, sha256(ago::text::bytea), gen_random_uuid(), 201, now() - ago
                FROM service_keys CROSS JOIN unnest(ARRAY[interval '2 days', interval '2 hours']) AS ago
                """)
            // Sent two days and two hours ago.
            _ = try await admin.execute(
                """
                INSERT INTO outbox (event_type, payload, channel, status, delivered_at)
                SELECT 'invitation.created', '{}', 'email', 'sent', now() - ago
                FROM unnest(ARRAY[interval '2 days', interval '2 hours']) AS ago
                """)
            await admin.close()
            // One a round: the second round records the other, and the first says so far.
            let first = try await run(["sweep", "--keep-sent", "1d", "--limit", "1", "--json"])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(try Self.json(first)["memberships"] as? Int == 2)
            #expect(
                first.stderr.contains("rbac: recorded 1 expired membership(s) and 0 expired invitation(s) so far"),
                "\(first.stderr)")
            #expect(try Self.json(first)["unreached"] as? Int == 0)
            #expect(try Self.json(first)["unreached_workers"] as? [String] == [])
            #expect(try Self.json(first)["outbox"] as? [String: Int] == ["sent": 1, "dead": 0])
            #expect(try Self.json(first)["kept_answers"] as? Int == 1)
            let second = try await run(["sweep", "--keep-sent", "1h"])
            #expect(
                second.stdout.contains("recorded 0 expired membership(s)") && second.stdout.contains("deleted 1 sent")
                    && second.stdout.contains("and 0 kept answer(s)"), "\(second.stdout)")
            #expect(
                try Self.json(try await run(["sweep", "--json"]))["outbox"] as? [String: Int] == ["sent": 0, "dead": 0])
            let members = try await run(["members", "--couple", couple])
            #expect(members.stdout.contains("expired"))
            for refused in [["--limit", "0"], ["--keep-sent", "0m"], ["--keep-dead", "1w"]] {
                #expect(try await run(["sweep"] + refused).status == 2, "\(refused)")
            }
        }
    }

    @Test(
        """
        sweep with a Citus worker down records the other couples' expiries, says how many wait, and exits 5; \
        serve's sweeper warns
        """,
        .enabled(if: !TestDatabase.citusWorkers.isEmpty, "needs the Citus cluster of scripts/citus-cluster"),
        .timeLimit(.minutes(2)))
    func sweepWithWorkerDown() async throws {
        try await Self.withCoupleOnEachWorker { secret, run, configuration, pool, couples in
            let (down, up) = couples
            #expect(try await run(["users", "add", "--email", "pia@example.com"]).status == 0)
            // On each worker, a couple whose planner's access ended a minute ago.
            for couple in [down, up] {
                let grant = ["--couple", couple, "--user", "pia@example.com", "--role", "planner"]
                #expect(try await run(["grant"] + grant + ["--expires", "1d"]).status == 0)
            }
            try await pool.query(
                "UPDATE memberships SET expires_at = now() - interval '1 minute' WHERE expires_at IS NOT NULL")
            try await TestDatabase.withFirstWorkerDown(pool) { node in
                let swept = try await run(["sweep", "--json"])
                #expect(swept.status == 5, "\(swept.stderr)")
                #expect(try Self.json(swept)["memberships"] as? Int == 1, "the up worker's couple's")
                #expect(try Self.json(swept)["unreached"] as? Int == 1)
                #expect(try Self.json(swept)["unreached_workers"] as? [String] == [node])
                #expect(
                    swept.stderr.contains(
                        """
                        rbac: 1 expiry(ies) wait for a later sweep: the Citus worker holding their couples' \
                        audit logs could not be reached: \(node) (the rest were recorded)
                        """),
                    "\(swept.stderr)")
                let warned = "sweeping failed in part"
                let (serve, _) = try await Self.serve(
                    ["--jwt-secret-file", secret], database: configuration.connectionString,
                    errorLog: "/dev/null", until: { $0.contains(warned) })
                defer { Task { await serve.stop() } }
                try #require(serve.ready, "serve did not warn: \(serve.lines)")
                let line = serve.lines.first { $0.contains(warned) } ?? ""
                #expect(
                    line.contains("left 1 for later: their couples' Citus worker could not be reached: \(node)"),
                    "\(line)")
                await serve.stop()
            }
            let after = try await run(["sweep", "--json"])
            #expect(after.status == 0, "\(after.stderr)")
            #expect(try Self.json(after)["memberships"] as? Int == 1, "the down worker's couple's, once it is back")
            #expect(try Self.json(after)["unreached"] as? Int == 0)
            #expect(try Self.json(after)["unreached_workers"] as? [String] == [])
        }
    }

    @Test(
        """
        serve and the CLI give up on a change to a couple whose Citus worker went silent once their connect \
        timeout passed, not Citus's 30 s
        """,
        .enabled(if: !TestDatabase.citusWorkers.isEmpty, "needs the Citus cluster of scripts/citus-cluster"),
        .timeLimit(.minutes(2)))
    func silentWorker() async throws {
        try await Self.withCoupleOnEachWorker { secret, run, configuration, pool, couples in
            let silent = couples.0
            let key = try #require(
                try Self.json(try await run(["keys", "create", "--name", "app", "--json"]))["secret"] as? String)
            let owner = try #require(
                (try Self.json(try await run(["users", "show", "olivia@example.com", "--json"]))["user"]
                    as? [String: Any])?["id"] as? String)
            func database(connectTimeout: Int) -> String {
                configuration.connectionString + " connect_timeout=\(connectTimeout)"
            }
            // Citus takes 10 ms to an hour for its own: a URL's for ever (0), or longer, still connects.
            for timeout in [0, 7200] {
                let listed = try await Self.rbac(
                    ["budget", "scenarios", "list", "--couple", silent], database: database(connectTimeout: timeout))
                #expect(listed.status == 0, "connect_timeout=\(timeout): \(listed.stderr)")
            }
            // Opening a connection waits 2 s here, the URL's connect_timeout: through the coordinator to a
            // worker too.
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret], database: database(connectTimeout: 2),
                errorLog: "/dev/null", until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            try await TestDatabase.withFirstWorkerDown(pool, silent: true) { _ in
                var request = URLRequest(
                    url: URL(string: "http://127.0.0.1:\(port)/v1/couples/\(silent)/budget/scenarios")!,
                    timeoutInterval: 60)
                request.httpMethod = "POST"
                request.httpBody = Data(#"{"name":"Main"}"#.utf8)
                for (field, value) in [
                    "Authorization": "Bearer \(key)", "X-Acting-User": owner, "Content-Type": "application/json",
                ] {
                    request.setValue(value, forHTTPHeaderField: field)
                }
                let (body, response) = try await URLSession.shared.data(for: request)
                let answer = String(decoding: body, as: UTF8.self)
                #expect((response as? HTTPURLResponse)?.statusCode == 503, "\(answer)")
                // Citus's words, which name the worker, are for the operator alone (serve's log, the CLI).
                #expect(
                    answer.contains(#""code":"unavailable""#) && answer.contains("cannot reach part of the database")
                        && !answer.contains("2000 ms"), "\(answer)")
                let added = try await Self.rbac(
                    ["budget", "scenarios", "add", "Spare", "--couple", silent], database: database(connectTimeout: 2))
                // Citus says how long it waited: the connect timeout, not its own 30 s.
                #expect(added.status == 5 && added.stderr.contains("after 2000 ms"), "\(added.stderr)")
            }
            await serve.stop()
        }
    }

    @Test(
        """
        serve warns as it starts when Citus's connections to its workers would wait out TCP, only on Citus and to a \
        role that may read the setting; an operator login that may not starts all the same
        """)
    func workerConnectionsWarning() async throws {
        try await Self.withServable { secret, _, configuration in
            func warned(database: String) async throws -> Bool {
                let (serve, _) = try await Self.serve(
                    ["--jwt-secret-file", secret], database: database, errorLog: "/dev/null",
                    until: { $0.contains("listening on") })
                defer { Task { await serve.stop() } }
                try #require(serve.ready, "serve did not start: \(serve.lines)")
                await serve.stop()
                return serve.lines.contains { $0.contains("give the coordinator's citus.node_conninfo") }
            }
            // The test cluster leaves citus.node_conninfo as Citus makes it, without a tcp_user_timeout.
            #expect(try await warned(database: configuration.connectionString) == !TestDatabase.citusWorkers.isEmpty)
            try await Self.asOperatorLogin(configuration) { database in
                let operatorWarned = try await warned(database: database)
                #expect(!operatorWarned, "it cannot see the setting")
            }
        }
    }

    /// On the Citus cluster, a servable database (`withServable`), a pool of two connections to it, and a couple
    /// made by `rbac couples create` (`createCouple`) on each worker: the first worker's, then the second's.
    static func withCoupleOnEachWorker(
        _ body: (
            String, @escaping ([String]) async throws -> Result, PostgresConfiguration, PostgresConnectionPool,
            (String, String)
        ) async throws -> Void
    ) async throws {
        try await withServable { secret, run, configuration in
            let pool = PostgresConnectionPool(configuration: configuration, maxConnections: 2)
            try await ensuring {
                let couples = try await TestDatabase.onEachWorker(pool) { _ in
                    let couple = try await createCouple(run)
                    return (try #require(UUID(uuidString: couple)), couple)
                }
                try await body(secret, run, configuration, pool, (couples.first, couples.second))
            } finally: {
                await pool.close()
            }
        }
    }

    @Test("policy test runs expectations naming couples' roles from the file's fixtures; a bad fixture exits 2")
    func policyTestWithCoupleRoles() async throws {
        let offline = "postgres://nobody@127.0.0.1:1/none"
        let shipped = try await Self.rbac(["policy", "test"], database: offline)
        #expect(shipped.status == 0, "\(shipped.stdout)")
        #expect(shipped.stdout.contains("ok - a planner may not give mom (no roles.assign)"))

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "rbac-policy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.copyItem(
            at: repositoryRoot.appendingPathComponent("policies/policy.json"),
            to: directory.appendingPathComponent("policy.json"))
        func test(_ json: String) async throws -> Result {
            try json.write(to: directory.appendingPathComponent("tests.json"), atomically: true, encoding: .utf8)
            return try await Self.rbac(["policy", "test", "--dir", directory.path], database: offline)
        }
        let failing = try await test(
            #"{"couple_roles": {"best_man": {"permissions": ["guests.edit", "couple.delete"]}}, "tests": ["#
                + #"{"description": "a partner may give best_man", "role": "partner", "grants": "best_man", "allowed": true},"#
                + #"{"description": "best_man may edit guests", "role": "best_man", "permission": "guests.edit", "allowed": true}]}"#
        )
        #expect(failing.status == 1, "a partner lacks couple.delete, so may not give the role")
        #expect(failing.stdout.contains("not ok - a partner may give best_man"))
        #expect(failing.stdout.contains("ok - best_man may edit guests"))
        let clash = try await test(#"{"couple_roles": {"viewer": {"permissions": []}}, "tests": []}"#)
        #expect(clash.status == 2 && clash.stderr.contains("no role of the policy"), "\(clash.stderr)")
        let unknown = try await test(#"{"couple_roles": {"mom": {"permissions": ["guests.fly"]}}, "tests": []}"#)
        #expect(unknown.status == 2 && unknown.stderr.contains("not in the policy"), "\(unknown.stderr)")
    }
}
