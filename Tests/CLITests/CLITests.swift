import ChildProcess
import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// End-to-end: the built `rbac` binary against a fresh, migrated database on the disposable server.
@Suite("The rbac command, end to end", .timeLimit(.minutes(2)))
struct CLITests {
    struct Result: Sendable {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// The built `rbac`: beside the test bundle, else the debug build.
    static let executable: URL = {
        let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("rbac")
        return FileManager.default.isExecutableFile(atPath: besideTests.path)
            ? besideTests : repositoryRoot.appendingPathComponent(".build/debug/rbac")
    }()

    /// Runs `rbac` with `arguments` against `database` (a libpq connection string), with `environment` added
    /// to the test's own.
    static func rbac(_ arguments: [String], database: String, environment added: [String: String] = [:])
        async throws -> Result
    {
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = database
        environment["RBAC_PUBLIC_URL"] = "https://rbac.test"
        environment.merge(added) { $1 }
        let result = try await ChildProcess.run(executable.path, arguments, environment: environment)
        return Result(status: result.status, stdout: result.output, stderr: result.errorOutput)
    }

    /// `rbac serve` on a free port against `database`, with `arguments` after `--port`, started as
    /// `ChildProcess.start` starts a server (`hangingUp`, `until`); its log, standard error included, goes to
    /// the pipe that reads its lines.
    static func serve(
        _ arguments: [String], database: String, errorLog: String, hangingUp: Bool = false,
        ulimit: String? = nil, until ready: @escaping @Sendable (String) -> Bool = { _ in true }
    ) async throws -> (serve: ChildProcess.Running, port: Int) {
        let free = try await ChildProcess.run(repositoryRoot.appendingPathComponent("scripts/free-port").path, [])
        let port = try #require(Int(free.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        let command = (ulimit.map { "ulimit \($0) && " } ?? "") + "exec \"$0\" serve --port \"$@\" 2>&1"
        let serve = try await ChildProcess.start(
            "/bin/sh", ["-c", command, executable.path, String(port)] + arguments,
            environment: ProcessInfo.processInfo.environment.merging(["DATABASE_URL": database]) { $1 },
            errorLog: errorLog, hangingUp: hangingUp, until: ready)
        return (serve, port)
    }

    /// A file holding a JWT secret for `rbac serve --jwt-secret-file`, removed afterwards.
    static func withJWTSecretFile(_ body: (String) async throws -> Void) async throws {
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("jwt-\(UUID())")
        try String(repeating: "s", count: 40).write(to: secret, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: secret) }
        try await body(secret.path)
    }

    /// A migrated database (as `withDatabase` gives it) and a JWT secret file for `rbac serve` on it.
    static func withServable(
        _ body: (String, @escaping ([String]) async throws -> Result, PostgresConfiguration) async throws -> Void
    ) async throws {
        try await withJWTSecretFile { secret in try await withDatabase { try await body(secret, $0, $1) } }
    }

    /// The arguments of `rbac serve` on a port another socket holds: a serve that gets past its checks exits 2,
    /// unable to listen, rather than running on.
    static func withServeOnTakenPort(_ body: ([String], UInt16) async throws -> Void) async throws {
        let (holder, port) = try listeningOnLoopback(backlog: 1)
        defer { close(holder) }
        try await withJWTSecretFile { secret in
            try await body(["serve", "--port", "\(port)", "--jwt-secret-file", secret], port)
        }
    }

    /// `rbac migrate`, distributing the database when the tests run on Citus.
    static let migrate = TestDatabase.citusWorkers.isEmpty ? ["migrate"] : ["migrate", "--citus"]

    /// A migrated database, a `rbac` runner bound to it, and its configuration for tests that also reach it
    /// directly.
    static func withDatabase(
        _ body: (@escaping ([String]) async throws -> Result, PostgresConfiguration) async throws -> Void
    ) async throws {
        try await TestDatabase.withFresh(from: .migrated) { configuration in
            let database = configuration.connectionString
            try await body({ try await rbac($0, database: database) }, configuration)
        }
    }

    /// `body` given the connection string of a new login role that belongs to rbac_operator and is no superuser,
    /// as a production login would be, on the database `configuration` names (migrated); dropped afterwards.
    static func asOperatorLogin(_ configuration: PostgresConfiguration, _ body: (String) async throws -> Void)
        async throws
    {
        let role = "cli_operator_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try await PostgresConnection.connect(configuration)
        try await ensuring {
            try await TestDatabase.settingUp {
                try await admin.runScript("CREATE ROLE \(identifier: role) LOGIN IN ROLE rbac_operator")
            }
            try await ensuring {
                try await body(configuration.connectionString + " user=\(role)")
            } finally: {
                try await TestDatabase.settingUp { try await admin.runScript("DROP ROLE \(identifier: role)") }
            }
        } finally: {
            await admin.close()
        }
    }

    /// The value at `key` of the JSON object a command printed.
    static func json(_ result: Result) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    static func jsonArray(_ result: Result) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
    }

    /// What the hint of a page listed with --json names as `field` on stderr, one line of JSON: where the next
    /// page starts. Nil when it says nothing, as a page that is not full does.
    static func next(_ field: String, of page: Result) throws -> Any? {
        guard !page.stderr.isEmpty else { return nil }
        try #require(page.stderr.firstIndex(of: "\n") == page.stderr.index(before: page.stderr.endIndex), "one line")
        let hint = try #require(try JSONSerialization.jsonObject(with: Data(page.stderr.utf8)) as? [String: Any])
        try #require(Array(hint.keys) == [field], "\(page.stderr)")
        return hint[field]
    }

    /// The place a full page's hint names (`next`).
    static func place(_ page: Result) throws -> String {
        try #require(try next("next_after", of: page) as? String)
    }

    static func createCouple(_ run: ([String]) async throws -> Result) async throws -> String {
        let created = try await run([
            "couples", "create", "--name", "Olivia & Paul", "--owner-email", "olivia@example.com", "--json",
        ])
        #expect(created.status == 0, "\(created.stderr)")
        let couple = try #require(try json(created)["couple"] as? [String: Any])
        let id = try #require(couple["id"] as? String)
        #expect(
            UUID(uuidString: id) != nil && id == id.lowercased(), "ids are printed in lower case, as psql prints them")
        return id
    }

    @Test("users add --identity makes the user with an identity; users list shows it; a taken one adds nothing")
    func identities() async throws {
        try await Self.withDatabase { run, _ in
            let auth0 = ["--identity", "https://tenant.eu.auth0.com/", "auth0|64f1c0ffee"]
            let added = try await run(["users", "add", "--email", "ann@example.com", "--json"] + auth0)
            #expect(added.status == 0, "\(added.stderr)")
            let identities = try #require(try Self.json(added)["identities"] as? [[String: String]])
            #expect(identities == [["issuer": "https://tenant.eu.auth0.com/", "subject": "auth0|64f1c0ffee"]])
            let taken = try await run(["users", "add", "--email", "bob@example.com"] + auth0)
            #expect(taken.status == 4 && taken.stderr.contains("this identity already belongs to a user"))
            let half = try await run(["users", "add", "--email", "cy@example.com", "--identity", "https://x.test/"])
            #expect(half.status == 2 && half.stderr.contains("--identity takes two values"))
            let listed = try await run(["users", "list"])
            #expect(listed.stdout.contains("https://tenant.eu.auth0.com/ auth0|64f1c0ffee"), "\(listed.stdout)")
            #expect(!listed.stdout.contains("bob@example.com"), "the refused user was not added")
            let audit = try await run(["audit", "--operator", "--tail", "1"]).stdout
            #expect(audit.contains("identity.insert  user_id="), "\(audit)")
            #expect(audit.contains(" issuer=https://tenant.eu.auth0.com/ subject=auth0|64f1c0ffee"), "who signs in")
            // One address, its ë composed or as e and a combining diaeresis: PostgreSQL compares the bytes.
            #expect(try await run(["users", "add", "--email", "zo\u{EB}@example.com"]).status == 0)
            let again = try await run(["users", "add", "--email", "zoe\u{308}@example.com"])
            #expect(again.status == 4, "\(again.stderr)")
        }
    }

    @Test("couples limit: a user who owns that many creates no more (exit 4, nothing written); the operator may")
    func coupleLimits() async throws {
        try await Self.withDatabase { run, _ in
            _ = try await Self.createCouple(run)
            #expect(try Self.json(try await run(["couples", "limit", "--json"]))["per_user"] as? Int == 20)
            #expect(try await run(["couples", "limit", "--per-user", "0"]).status == 2)
            let set = try await run(["couples", "limit", "--per-user", "1"])
            #expect(set.stdout == "A user may create couples while owning fewer than 1.\n", "\(set.stdout)")
            let limited = try await run(["audit", "--operator", "--tail", "1"]).stdout
            #expect(limited.contains("couple_setting.update  owned_per_user 20→1"), "\(limited)")
            let create = ["couples", "create", "--name", "Another", "--owner-email", "olivia@example.com"]
            let refused = try await run(create + ["--actor", "olivia@example.com", "--json"])
            #expect(refused.status == 4, "\(refused.stderr)")
            #expect(refused.stderr.hasPrefix(#"{"error":{"code":"quota_exceeded""#), "\(refused.stderr)")
            #expect(
                refused.stderr.contains("owns 1 couples, and a user creates couples only while owning fewer than 1"))
            #expect(try Self.jsonArray(try await run(["couples", "list", "--json"])).count == 1)
            #expect(try await run(create).status == 0, "the operator's creations are not held to it")
            #expect(try Self.jsonArray(try await run(["couples", "list", "--json"])).count == 2)
        }
    }

    @Test("invitations limit and couples set --invite-domains: past them inviting exits 4 or 2 and writes nothing")
    func invitationLimits() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            #expect(try Self.json(try await run(["invitations", "limit", "--json"]))["per_hour"] as? Int == 50)
            #expect(try await run(["invitations", "limit", "--per-hour", "2"]).status == 0)
            #expect(try await run(["invitations", "limit", "--per-hour", "0"]).status == 2)
            let limited = try await run(["audit", "--operator", "--tail", "1"]).stdout
            #expect(limited.contains("invitation_setting.update  per_couple_per_hour 50→2"), "\(limited)")
            for _ in 0..<2 { #expect(try await run(["invite", "--couple", couple, "--role", "viewer"]).status == 0) }
            let third = try await run(["invite", "--couple", couple, "--role", "viewer"])
            #expect(third.status == 4 && third.stderr.contains("invitations in the last hour"), "\(third.stderr)")
            #expect(
                try Self.jsonArray(try await run(["invitations", "list", "--couple", couple, "--json"])).count == 2)

            #expect(try await run(["invitations", "limit", "--per-hour", "100"]).status == 0)
            let set = try await run([
                "couples", "set", couple, "--invite-domains", "Example.com", "--invite-domains", " wedding.test",
                "--json",
            ])
            #expect(try Self.json(set)["invite_domains"] as? [String] == ["example.com", "wedding.test"])
            let shown = try await run(["couples", "show", couple])
            #expect(
                shown.stdout.contains("Invitations may name addresses at example.com, wedding.test only"),
                "\(shown.stdout)")
            let detail = try Self.json(try await run(["couples", "show", couple, "--json"]))
            #expect(detail["invite_domains"] as? [String] == ["example.com", "wedding.test"])
            let elsewhere = try await run(["invite", "--couple", couple, "--role", "viewer", "--email", "a@gmail.com"])
            #expect(
                elsewhere.status == 2 && elsewhere.stderr.contains("invites only addresses at"), "\(elsewhere.stderr)")
            let allowed = ["invite", "--couple", couple, "--role", "viewer", "--email", "a@example.com"]
            #expect(try await run(allowed).status == 0)
            let refused = try await run(["couples", "set", couple, "--invite-domains", "not a domain"])
            #expect(refused.status == 2 && refused.stderr.contains("not a domain: 'not a domain'"), "\(refused.stderr)")
            // A stray comma would otherwise leave no domain, which allows any address.
            for stray in [[","], ["example.com,,wedding.test"], [" , "], ["", "--invite-domains", "example.com"]] {
                let empty = try await run(["couples", "set", couple, "--invite-domains"] + stray)
                #expect(empty.status == 2 && empty.stderr.contains("has an empty entry"), "\(empty.stderr)")
            }
            let many = (0...100).map { "d\($0).example" }.joined(separator: ",")
            let tooMany = try await run(["couples", "set", couple, "--invite-domains", many])
            #expect(tooMany.status == 2 && tooMany.stderr.contains("at most 100 domains"), "\(tooMany.stderr)")
            let kept = try Self.json(try await run(["couples", "show", couple, "--json"]))
            #expect(kept["invite_domains"] as? [String] == ["example.com", "wedding.test"])
            let audit = try await run(["audit", "--couple", couple]).stdout
            #expect(audit.contains("couple.insert "), "\(audit)")
            #expect(audit.contains("couple.update      name=Olivia & Paul invite_domains →example.com,wedding.test\n"))

            // A domain beyond ASCII is kept as DNS knows it, and an address there matches however it is written.
            let unicode = try await run(["couples", "set", couple, "--invite-domains", "Bücher.example", "--json"])
            #expect(try Self.json(unicode)["invite_domains"] as? [String] == ["xn--bcher-kva.example"])
            let detailed = try await run(["couples", "show", couple]).stdout
            #expect(detailed.contains("addresses at bücher.example (xn--bcher-kva.example) only"), "\(detailed)")
            let there = ["invite", "--couple", couple, "--role", "viewer", "--email", "ann@bücher.example"]
            #expect(try await run(there).status == 0)
        }
    }

    @Test(
        "users show, edit and delete: with --yes, never a couple's last owner; the logs keep the id, not the address")
    func editAndDeleteUser() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            #expect(try await run(["users", "add", "--email", "pia@example.com", "--name", "Pia Q"]).status == 0)
            let grant = ["grant", "--couple", couple, "--user", "pia@example.com", "--role", "planner"]
            #expect(try await run(grant).status == 0)
            // Before: the user and the couples they belong to.
            let shown = try await run(["users", "show", "pia@example.com"])
            #expect(shown.stdout.hasPrefix("pia@example.com  Pia Q  "), "\(shown)")
            #expect(shown.stdout.contains("\n\(couple)  Olivia & Paul  planner  active"), "\(shown.stdout)")
            let detail = try Self.json(try await run(["users", "show", "pia@example.com", "--json"]))
            #expect((detail["couples"] as? [[String: Any]])?.map { $0["couple_id"] as? String } == [couple])
            let zoe = ["users", "add", "--email", "zoe@example.com", "--identity", "https://idp.example/", "zoe-1"]
            #expect(try await run(zoe).status == 0)
            let before = try await run(["users", "list", "--json"])
            let refusals: [([String], Int32, String)] = [
                (["users", "show", "nobody@example.com"], 3, "user nobody@example.com does not exist"),
                (["users", "delete", "pia@example.com"], 2, "deleting a user cannot be undone; add --yes"),
                (["users", "delete", "olivia@example.com", "--yes"], 4, "must keep at least one owner"),
                (["users", "delete", "nobody@example.com", "--yes"], 3, "user nobody@example.com does not exist"),
                (
                    ["users", "edit", "pia@example.com"], 2,
                    "give what to change: --email, --name, --no-name, --identity"
                ),
                (["users", "edit", "pia@example.com", "--identity", "https://idp.example/"], 2, "takes two values"),
                (
                    ["users", "edit", "pia@example.com", "--name", "P", "--identity", "https://idp.example/", "zoe-1"],
                    4,
                    "this identity already belongs to a user"
                ),
                (
                    ["users", "edit", "pia@example.com", "--remove-identity", "https://idp.example/", "zoe-1"], 3,
                    "has no such identity"
                ),
                (["users", "edit", "pia@example.com", "--name", "P", "--no-name"], 2, "cannot go together"),
                (["users", "edit", "pia@example.com", "--email", "pia"], 2, "\"pia\" is not an email address"),
                (["users", "edit", "pia@example.com", "--email", "Olivia@example.com"], 4, "already exists"),
                (["users", "edit", "nobody@example.com", "--name", "N"], 3, "user nobody@example.com does not exist"),
                // Granting names what to do for an address no user has.
                (
                    ["grant", "--couple", couple, "--user", "nobody@example.com", "--role", "planner"], 3,
                    "user nobody@example.com does not exist: add them with `rbac users add --email nobody@example.com`, "
                        + "or invite them with `rbac invite --couple \(couple) --email nobody@example.com --role planner`"
                ),
                // ... but not an invitation its role would refuse.
                (
                    ["grant", "--couple", couple, "--user", "nobody@example.com", "--role", "florist"], 2,
                    "unknown role \"florist\"; valid roles: owner, partner, planner, viewer\n"
                ),
            ]
            for (arguments, status, message) in refusals {
                let refused = try await run(arguments)
                #expect(refused.status == status && refused.stderr.contains(message), "\(arguments): \(refused)")
            }
            #expect(try await run(["users", "list", "--json"]).stdout == before.stdout, "the refusals changed nothing")
            let unknownID = try await run(
                ["grant", "--couple", couple, "--user", UUID().uuidString.lowercased(), "--role", "planner"])
            #expect(unknownID.status == 3 && unknownID.stderr.hasSuffix("does not exist\n"), "\(unknownID)")

            let edit = ["users", "edit", "pia@example.com", "--email", "pia.quinn@example.com", "--name", "Pia Quinn"]
            let edited = try Self.json(try await run(edit + ["--json"]))
            #expect(
                edited["email"] as? String == "pia.quinn@example.com"
                    && edited["display_name"] as? String == "Pia Quinn")
            #expect(try await run(["users", "show", "pia@example.com"]).status == 3, "the old address names nobody")
            #expect(try await run(["users", "edit", "pia.quinn@example.com", "--no-name"]).status == 0)
            let renamed = try await run(["users", "show", "pia.quinn@example.com"])
            #expect(
                renamed.stdout.hasPrefix("pia.quinn@example.com  \(edited["id"] as? String ?? "?")\n"), "\(renamed)")
            let change = try await run(["audit", "--operator", "--tail", "2"]).stdout
            #expect(
                change.contains(
                    "user.update  email pia@example.com→pia.quinn@example.com display_name Pia Q→Pia Quinn"),
                "\(change)")
            #expect(change.contains("user.update  display_name Pia Quinn→null"), "\(change)")
            let account = ["https://idp.example/", "pia-1"]
            let linked = try await run(["users", "edit", "pia.quinn@example.com", "--identity"] + account + ["--json"])
            #expect(
                (try Self.json(linked)["identities"] as? [[String: String]]) == [
                    ["issuer": "https://idp.example/", "subject": "pia-1"]
                ], "\(linked)")
            let unlinked = try await run(["users", "edit", "pia.quinn@example.com", "--remove-identity"] + account)
            #expect(unlinked.status == 0, "\(unlinked)")
            #expect(try await run(["users", "show", "pia.quinn@example.com"]).stdout.contains("Identities") == false)
            let logged = try await run(["audit", "--operator", "--tail", "2"]).stdout
            #expect(logged.contains("identity.insert") && logged.contains("identity.delete"), "\(logged)")

            let deleted = try await run(["users", "delete", "pia.quinn@example.com", "--yes", "--json"])
            let id = try #require(try Self.json(deleted)["deleted"] as? String, "\(deleted)")
            #expect(!(try await run(["users", "list"]).stdout.contains("pia.quinn@example.com")))
            #expect(!(try await run(["members", "--couple", couple]).stdout.contains(id)))
            #expect(try await run(["audit", "--couple", couple]).stdout.contains("membership.delete  user_id=\(id)"))
            let log = try await run(["audit", "--operator", "--json"]).stdout
            #expect(log.contains(id) && !log.contains("pia") && !log.contains("Pia Q"), "\(log)")
            let table = try await run(["audit", "--operator", "--tail", "1"]).stdout
            #expect(table.hasSuffix("user.delete  id=\(id)\n"), "the entry names whom it deleted: \(table)")
        }
    }

    @Test("a couple is renamed with couple.edit and deleted, all of it, with couple.delete and --yes")
    func renameAndDeleteCouple() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let pia = try Self.json(try await run(["users", "add", "--email", "pia@example.com", "--json"]))
            let piaID = try #require(pia["id"] as? String)
            #expect(
                try await run(["grant", "--couple", couple, "--user", "pia@example.com", "--role", "partner"]).status
                    == 0)
            let asPartner = ["--actor", "pia@example.com"]
            let renamed = try await run(
                ["couples", "rename", couple, "--name", " Olivia & Paul Smith", "--json"] + asPartner)
            #expect(try Self.json(renamed)["name"] as? String == "Olivia & Paul Smith", "\(renamed.stderr)")
            #expect(try await run(["couples", "rename", couple, "--name", ""]).status == 2)

            let unconfirmed = try await run(["couples", "delete", couple])
            #expect(unconfirmed.status == 2 && unconfirmed.stderr.contains("add --yes"), "\(unconfirmed.stderr)")
            let denied = try await run(["couples", "delete", couple, "--yes"] + asPartner)
            #expect(denied.status == 1 && denied.stderr.contains("needs couple.delete"), "\(denied.stderr)")
            #expect(!denied.stderr.contains(piaID), "named by email here, so not by an id: \(denied.stderr)")
            let deleted = try await run([
                "couples", "delete", couple, "--yes", "--actor", "olivia@example.com", "--json",
            ])
            #expect(try Self.json(deleted)["deleted"] as? String == couple, "\(deleted.stderr)")
            let gone = try await run(["couples", "show", couple])
            #expect(gone.status == 3 && gone.stderr.contains("does not exist"), "\(gone.stderr)")
            let audit = try await run(["audit", "--couple", couple]).stdout
            #expect(audit.contains(/olivia@example\.com +couple\.delete +name=Olivia & Paul Smith/), "\(audit)")
        }
    }

    @Test("create couple, grant, check exits 0; revoke, check exits 1")
    func grantCheckRevoke() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            #expect(try await run(["users", "add", "--email", "pia@example.com", "--name", "Pia"]).status == 0)
            let grant = try await run(["grant", "--couple", couple, "--user", "pia@example.com", "--role", "planner"])
            #expect(grant.status == 0, "\(grant.stderr)")
            let allowed = try await run([
                "check", "--couple", couple, "--user", "pia@example.com", "--permission", "budget.edit",
            ])
            #expect(allowed.status == 0 && allowed.stdout == "allowed\n")
            let denied = try await run([
                "check", "--couple", couple, "--user", "pia@example.com", "--permission", "couple.delete",
            ])
            #expect(denied.status == 1 && denied.stdout == "denied\n")
            let revoke = try await run(["revoke", "--couple", couple, "--user", "pia@example.com", "--json"])
            #expect(revoke.status == 0)
            let revision = try #require(try Self.json(revoke)["revision"] as? Int, "a write reports its revision")
            let after = try await run([
                "check", "--couple", couple, "--user", "pia@example.com", "--permission", "budget.edit", "--json",
            ])
            #expect(after.status == 1)
            #expect(try Self.json(after)["allowed"] as? Bool == false)
            #expect(try Self.json(after)["revision"] as? Int == revision, "the check reads the write's revision")
        }
    }

    @Test(
        "members, invitations, users and couples list one page at a time with --limit and --after, past deleted rows; bad page options exit 2"
    )
    func pages() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            for name in ["pia", "Paul", "vera", "sam"] {
                let created = try await run([
                    "couples", "create", "--name", name, "--owner-email", "olivia@example.com",
                ])
                #expect(created.status == 0, "\(created.stderr)")
                #expect(try await run(["users", "add", "--email", "\(name)@example.com"]).status == 0)
                let grant = try await run([
                    "grant", "--couple", couple, "--user", "\(name)@example.com", "--role", "viewer",
                ])
                #expect(grant.status == 0, "\(grant.stderr)")
                #expect(try await run(["invite", "--couple", couple, "--role", "viewer"]).status == 0)
            }
            let listings = [
                (["members", "--couple", couple], "user"), (["invitations", "list", "--couple", couple], "id"),
                (["users", "list"], "id"), (["couples", "list"], "id"),
            ]
            for (listing, idKey) in listings {
                func ids(_ result: Result) throws -> [String] {
                    try Self.jsonArray(result).map { entry in
                        let id = idKey == "user" ? (entry["user"] as? [String: Any])?["id"] : entry["id"]
                        return try #require(id as? String)
                    }
                }
                let every = try ids(try await run(listing + ["--json"]))
                #expect(every.count >= 4)
                // Walk the pages of two, following each hint on stderr.
                var walked: [String] = []
                var after: [String] = []
                var pages = 0
                while true {
                    pages += 1
                    let page = try await run(listing + ["--limit", "2", "--json"] + after)
                    #expect(page.status == 0, "\(page.stderr)")
                    let pageIDs = try ids(page)
                    walked += pageIDs
                    guard pageIDs.count == 2 else {
                        #expect(page.stderr.isEmpty, "a page that is not full says nothing more may follow")
                        break
                    }
                    after = ["--after", try Self.place(page)]
                    #expect(after[1].hasPrefix(pageIDs[1] + "."), "the last entry's id, then its place")
                }
                #expect(walked == every, "the pages of \(listing) hold every entry once, in order")
                #expect(pages == every.count / 2 + 1, "full pages of two, then the rest (perhaps none)")
            }
            // The place a hint names holds once its entry is gone; the entry's id alone then names nothing.
            let members = ["members", "--couple", couple, "--limit", "2", "--json"]
            func memberIDs(_ result: Result) throws -> [String] {
                try Self.jsonArray(result).map { try #require(($0["user"] as? [String: Any])?["id"] as? String) }
            }
            let firstPage = try await run(members)
            let asText = try await run(members.dropLast())
            #expect(
                asText.stderr == "rbac: more may follow: --after \(try Self.place(firstPage))\n",
                "for people, the same place in a sentence")
            let gone = try #require(try memberIDs(firstPage).last)
            let revoked = try await run(["revoke", "--couple", couple, "--user", gone])
            #expect(revoked.status == 0, "\(revoked.stderr)")
            let left = try memberIDs(try await run(["members", "--couple", couple, "--json"]))
            let nextPage = try await run(members + ["--after", try Self.place(firstPage)])
            #expect(nextPage.status == 0, "\(nextPage.stderr)")
            #expect(try memberIDs(nextPage) == Array(left[1..<3]), "the two who joined after the member who left")
            let byID = try await run(members + ["--after", gone])
            #expect(byID.status == 3 && byID.stderr.contains("no member"), "\(byID.stderr)")
            // Users by email whatever its case, couples oldest first.
            let emails = try Self.jsonArray(try await run(["users", "list", "--json"])).compactMap {
                $0["email"] as? String
            }
            #expect(
                emails == emails.sorted { $0.lowercased() < $1.lowercased() } && emails.contains("Paul@example.com"))
            let found = try Self.jsonArray(try await run(["users", "list", "--search", "PAUL", "--json"]))
            #expect(found.compactMap { $0["email"] as? String } == ["Paul@example.com"], "a search, whatever its case")
            let none = try await run(["users", "list", "--search", "nobody at all", "--json"])
            #expect(none.status == 0 && none.stdout == "[]\n", "an empty listing is an empty array on one line")
            let empty = try await run(["users", "list", "--search", ""])
            #expect(empty.status == 2 && empty.stderr.contains("a search must be 1 to 200 characters, not 0"))
            let names = try Self.jsonArray(try await run(["couples", "list", "--json"])).compactMap {
                $0["name"] as? String
            }
            #expect(names == ["Olivia & Paul", "pia", "Paul", "vera", "sam"])
            for listing in [["users", "list"], ["couples", "list"]] {
                let unknown = try await run(
                    listing + ["--limit", "2", "--after", "00000000-0000-0000-0000-000000000000"])
                #expect(
                    unknown.status == 3
                        && unknown.stderr.contains("00000000-0000-0000-0000-000000000000 does not exist"))
            }
            for (options, message) in [
                (["--limit", "0"], "--limit must be from 1 to 1000, not 0"),
                (["--limit", "1001"], "--limit must be from 1 to 1000, not 1001"),
                (["--limit", "-3"], "--limit must be from 1 to 1000, not -3"),
                (["--after", "00000000-0000-0000-0000-000000000000"], "--after needs --limit: it picks a page"),
                (["--limit", "2", "--after", "1; DROP TABLE users"], "\"1; DROP TABLE users\" is neither an id"),
                (["--limit", "2", "--after", "\(couple).WyJ4Il0"], "--after \"\(couple).WyJ4Il0\" is neither an id"),
            ] {
                let refused = try await run(["members", "--couple", couple] + options)
                #expect(refused.status == 2)
                #expect(refused.stderr.contains(message), "\(refused.stderr)")
            }
        }
    }

    @Test("listings longer than a page of 1,000 print as one array or one table, every entry once, in order")
    func longListings() async throws {
        try await Self.withDatabase { run, configuration in
            // Addresses of two lengths, the longer ones read last: a table's columns are as wide as its first
            // page needs, and a longer cell later takes the room it needs.
            let connection = try await PostgresConnection.connect(configuration)
            try await connection.execute(
                """
                INSERT INTO users (email, display_name)
                SELECT format('u%s@example.com', lpad(n::text, 4, '0')) || CASE WHEN n > 2000 THEN '.org' ELSE '' END,
                       'User ' || n
                FROM generate_series(1, 2500) n
                """)
            await connection.close()
            let listed = try await run(["users", "list", "--json"])
            #expect(listed.status == 0 && listed.stdout.hasSuffix("}\n]\n"), "\(listed.stderr)")
            let emails = try Self.jsonArray(listed).compactMap { $0["email"] as? String }
            var paged: [String] = []
            var after: [String] = []
            while true {
                let page = try Self.jsonArray(try await run(["users", "list", "--limit", "1000", "--json"] + after))
                paged += page.compactMap { $0["email"] as? String }
                guard page.count == 1000, let last = page.last?["id"] as? String else { break }
                after = ["--after", last]
            }
            #expect(emails.count == 2500 && emails == paged, "\(emails.count) listed, \(paged.count) in pages")
            let table = try await run(["users", "list"]).stdout.split(separator: "\n")
            #expect(
                table.count == 2501 && table[0].hasPrefix("ID ")
                    && table.dropFirst().allSatisfy { !$0.hasPrefix("ID ") })
            let rows = table.dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: true) }
            #expect(rows.map { $0.dropFirst().first.map(String.init) } == emails, "a row per user, in order")
            // The name column starts where the first page put it, but on rows whose address is wider.
            let nameColumn = try #require(table[0].range(of: "NAME")).lowerBound.utf16Offset(in: table[0])
            let starts = try table.dropFirst().map {
                try #require($0.range(of: "User ")).lowerBound.utf16Offset(in: $0)
            }
            #expect(
                starts.prefix(2000).allSatisfy { $0 == nameColumn }
                    && starts.suffix(500).allSatisfy { $0 == nameColumn + 4 })
            // The operator's log, which recorded each user made: every entry once, in order, as `--tail` has them.
            let log = try Self.jsonArray(try await run(["audit", "--operator", "--json"])).compactMap {
                $0["id"] as? Int
            }
            let tail = try Self.jsonArray(try await run(["audit", "--operator", "--tail", "3000", "--json"]))
            #expect(log.count > 2500 && log == tail.compactMap { $0["id"] as? Int }, "\(log.count) entries")
            let older = try Self.jsonArray(
                try await run(["audit", "--operator", "--before", String(log[2400]), "--json"]))
            #expect(older.compactMap { $0["id"] as? Int } == Array(log.prefix(2400)))
            let lines = try await run(["audit", "--operator"]).stdout.split(separator: "\n")
            #expect(lines.count == log.count + 1 && lines[0].hasPrefix("ID "))
            let unknown = try await run(["audit", "--operator", "--before", "999999999"])
            #expect(unknown.status == 3 && unknown.stdout.isEmpty, "\(unknown.stderr)")
        }
    }

    @Test("suspend and reactivate: the role stays and grants nothing meanwhile; refusals change nothing")
    func suspendAndReactivate() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            for (email, role) in [("pia@example.com", "planner"), ("vera@example.com", "viewer")] {
                #expect(try await run(["users", "add", "--email", email]).status == 0)
                #expect(try await run(["grant", "--couple", couple, "--user", email, "--role", role]).status == 0)
            }
            let pia = ["--couple", couple, "--user", "pia@example.com"]
            let check = ["check"] + pia + ["--permission", "budget.edit"]
            let suspended = try await run(["suspend"] + pia)
            #expect(suspended.stdout == "Suspended pia@example.com (planner) in couple \(couple)\n", "\(suspended)")
            #expect(try await run(check).status == 1, "a suspended member's role grants nothing")
            func status() async throws -> [String?] {
                try Self.jsonArray(try await run(["members", "--couple", couple, "--json"])).map {
                    "\(($0["user"] as? [String: Any])?["email"] ?? "") \($0["role"] ?? "") \($0["status"] ?? "")"
                }
            }
            let listed = try await status()
            #expect(listed.contains("pia@example.com planner suspended"), "\(listed)")
            let again = try Self.json(try await run(["suspend"] + pia + ["--json"]))
            let reactivated = try Self.json(try await run(["reactivate"] + pia + ["--json"]))
            #expect(reactivated["status"] as? String == "active" && reactivated["role"] as? String == "planner")
            let revision = try #require(again["revision"] as? Int)
            #expect(reactivated["revision"] as? Int == revision + 1, "suspending a suspended member changed nothing")
            #expect(try await run(check).status == 0)

            let before = try await status()
            for (arguments, exit, message) in [
                (["suspend", "--couple", couple, "--user", "olivia@example.com"], 4, "must keep at least one owner"),
                (
                    ["suspend", "--couple", couple, "--user", "nobody@example.com"], 3,
                    "nobody@example.com does not exist"
                ),
                (["suspend"] + pia + ["--actor", "vera@example.com"], 1, "this needs collaborators.manage"),
                (["reactivate", "--couple", "C", "--user", "pia@example.com"], 2, "\"C\" is not a couple id"),
            ] {
                let refused = try await run(arguments)
                #expect(refused.status == exit && refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
            }
            #expect(try await status() == before)
        }
    }

    @Test("the sole owner leaving exits 4 with the last-owner message and changes nothing")
    func soleOwnerLeaving() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let before = try await run(["members", "--couple", couple, "--json"])
            let leave = try await run(["leave", "--couple", couple, "--user", "olivia@example.com"])
            #expect(leave.status == 4)
            #expect(leave.stderr.contains("couple \"Olivia & Paul\" must keep at least one owner"))
            #expect(leave.stderr.split(separator: "\n").count == 1, "one line on stderr")
            #expect(try await run(["members", "--couple", couple, "--json"]).stdout == before.stdout)
        }
    }

    @Test("a login role that is no rbac operator is refused before anything, saying so: never an empty listing")
    func nonOperatorRole() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 1) { pool in
            // An end user's role, as Supabase's would be: row-level security would show it no couple at all.
            let role = "cli_app_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            let name: String = try await pool.query("SELECT current_database()")[0].decode(column: 0)
            let database = "dbname=\(name) user=\(role)"
            try await TestDatabase.settingUp {
                try await pool.withConnection { try await $0.runScript("CREATE ROLE \(identifier: role) LOGIN") }
                try await pool.withConnection { try await $0.runScript("GRANT rbac_app TO \(identifier: role)") }
            }
            try await ensuring {
                let listed = try await Self.rbac(["couples", "list"], database: database)
                #expect(listed.status == 1 && listed.stdout.isEmpty, "\(listed.stderr)")
                #expect(
                    listed.stderr.contains(
                        "logs in as \"\(role)\", which is no rbac operator: connect as a member of rbac_operator"),
                    "\(listed.stderr)")
                let created = try await Self.rbac(
                    ["couples", "create", "--name", "Olivia & Paul", "--owner-email", "olivia@example.com", "--json"],
                    database: database)
                #expect(created.status == 1 && created.stderr.hasPrefix(#"{"error":{"code":"permission_denied""#))
                let rows: Int = try await pool.query(
                    "SELECT (SELECT count(*) FROM couples) + (SELECT count(*) FROM users)")[0].decode(column: 0)
                #expect(rows == 0, "nothing was written")
                // Nor does serve start on it (it would say next that it has no way to verify tokens, exit 2).
                let served = try await Self.rbac(
                    ["serve", "--port", "1"], database: database, environment: ["RBAC_JWT_SECRET": ""])
                #expect(served.status == 1 && served.stderr.contains("which is no rbac operator"), "\(served.stderr)")
                // Nor does migrating, which says what to connect as.
                let migrated = try await Self.rbac(["migrate"], database: database)
                #expect(migrated.status == 1, "\(migrated.stderr)")
                #expect(migrated.stderr.contains("which is neither a superuser nor a member of rbac_operator"))
            } finally: {
                try await TestDatabase.settingUp {
                    try await pool.withConnection { try await $0.runScript("DROP ROLE \(identifier: role)") }
                }
            }
        }
    }

    /// Not on Citus, where the coordinator creates the schema on the workers as the migrating login, in
    /// databases it does not own there: a superuser migrates a Citus cluster (`rbac migrate --citus` as well).
    @Test(
        "the database's owner migrates it once a member of rbac_operator; before, nothing is applied",
        .enabled(if: TestDatabase.citusWorkers.isEmpty, "on Citus, a superuser migrates"))
    func ownerMigrates() async throws {
        let role = "cli_owner_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try await PostgresConnection.connect(try TestDatabase.server())
        try await ensuring {
            // CREATEROLE, as managed PostgreSQL gives its first login: the first migration asks to create roles.
            try await TestDatabase.settingUp {
                try await admin.runScript("CREATE ROLE \(identifier: role) LOGIN CREATEROLE")
            }
            try await TestDatabase.withFresh { configuration in
                let probe = try await PostgresConnection.connect(configuration)
                let name: String = try await probe.query("SELECT current_database()")[0].decode(column: 0)
                await probe.close()
                try await TestDatabase.settingUp {
                    try await admin.runScript("ALTER DATABASE \(identifier: name) OWNER TO \(identifier: role)")
                }
                let database = "dbname=\(name) user=\(role)"
                let refused = try await Self.rbac(["migrate"], database: database)
                #expect(refused.status == 1, "\(refused.stderr)")
                #expect(
                    refused.stderr.contains(
                        "which is neither a superuser nor a member of rbac_operator: the functions it installs run "
                            + "with its rights"), "\(refused.stderr)")
                #expect(refused.stderr.contains("GRANT rbac_operator TO \"\(role)\""))
                let status = try await Self.rbac(["migrate", "--status", "--json"], database: database)
                let states = try Self.jsonArray(status).map { $0["state"] as? String }
                #expect(!states.isEmpty && states.allSatisfy { $0 == "pending" }, "nothing applied: \(states)")
                try await TestDatabase.settingUp {
                    try await admin.runScript("GRANT rbac_operator TO \(identifier: role)")
                }
                let migrated = try await TestDatabase.settingUp { try await Self.rbac(["migrate"], database: database) }
                #expect(migrated.status == 0, "\(migrated.stderr)")
                let created = try await Self.rbac(
                    ["couples", "create", "--name", "Olivia & Paul", "--owner-email", "olivia@example.com"],
                    database: database)
                #expect(created.status == 0, "its functions see past row-level security: \(created.stderr)")
            }
        } finally: {
            try await TestDatabase.settingUp { try await admin.runScript("DROP ROLE IF EXISTS \(identifier: role)") }
            await admin.close()
        }
    }

    @Test("with --json a failure is one JSON line on stderr, coded as the HTTP API codes it; the exit code is kept")
    func failuresAsJSON() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let unknown = UUID().uuidString.lowercased()
            let cases: [([String], Int32, String)] = [
                (["leave", "--couple", couple, "--user", "olivia@example.com", "--json"], 4, "last_owner"),
                (["couples", "show", unknown, "--json"], 3, "not_found"),
                (["members", "--json"], 2, "invalid_input"),
                (["members", "--couple", "zz", "--json"], 2, "invalid_input"),
                (["members", "--couple", couple, "--limit", "ten", "--json"], 2, "invalid_input"),
                (
                    ["grant", "--couple", couple, "--user", "olivia@example.com", "--role", "chef", "--json"], 2,
                    "invalid_input"
                ),
            ]
            for (arguments, status, code) in cases {
                let result = try await run(arguments)
                let lines = result.stderr.split(separator: "\n")
                let object = try lines.first.flatMap {
                    try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: [String: String]]
                }
                #expect(result.status == status && lines.count == 1, "\(arguments): \(result.stderr)")
                #expect(object?["error"]?["code"] == code, "\(arguments): \(result.stderr)")
                #expect(object?["error"]?["message"]?.isEmpty == false && result.stdout.isEmpty, "\(arguments)")
            }
            // A value ArgumentParser cannot read: its message, then the option's help, which says what it takes.
            let malformed = try await run(["members", "--couple", couple, "--limit", "ten", "--json"])
            #expect(
                malformed.stderr.contains(
                    #""message":"The value 'ten' is invalid for '--limit <n>'. Help: --limit <n> Only one page of "#),
                "\(malformed.stderr)")
            let text = try await run(["couples", "show", unknown])
            #expect(text.status == 3 && text.stderr == "rbac: couple \(unknown) does not exist\n", "without --json")
            // A denial is an answer, not a failure: on stdout, exit 1, as ever.
            _ = try await run(["users", "add", "--email", "vic@example.com"])
            _ = try await run(["grant", "--couple", couple, "--user", "vic@example.com", "--role", "viewer"])
            let denied = try await run([
                "check", "--couple", couple, "--user", "vic@example.com", "--permission", "vendors.edit", "--json",
            ])
            #expect(denied.status == 1 && denied.stderr.isEmpty, "\(denied.stderr)")
            #expect(try Self.json(denied)["allowed"] as? Bool == false)
        }
    }

    @Test("budget limits set: all or none; a write past one exits 4, naming it, and adds nothing")
    func budgetLimits() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let (list, set) = (["budget", "limits", "list"], ["budget", "limits", "set"])
            let refused = try await run(set + ["budget_scenarios=1", "scenarios=5"])
            #expect(refused.status == 2)
            #expect(
                refused.stderr
                    == "rbac: \"scenarios\" is not a budget table; the tables are budget_folders, budget_items, budget_scenarios, expense_allocations, expense_payments, expenses, gifts_and_owed\n"
            )
            #expect(try await run(list).stdout.contains("budget_scenarios     100\n"), "the valid change did not apply")
            #expect(try await run(set + ["budget_scenarios=-1"]).status == 2)
            #expect(try await run(set + ["budget_scenarios=+5"]).status == 2)
            #expect(try await run(set + ["budget_scenarios"]).status == 2)
            #expect(try await run(set).status == 2, "nothing to set")
            #expect(try await run(set + ["budget_scenarios=1"]).status == 0)

            let scenarios = ["budget", "scenarios"]
            #expect(try await run(scenarios + ["add", "Main", "--couple", couple]).status == 0)
            let before = try await run(scenarios + ["list", "--couple", couple, "--json"])
            let full = try await run(scenarios + ["add", "Plan B", "--couple", couple])
            #expect(full.status == 4)
            #expect(
                full.stderr
                    == "rbac: this would pass the couple's limit of scenarios (1); delete some first, or ask an operator to raise the limit\n"
            )
            #expect(try await run(scenarios + ["list", "--couple", couple, "--json"]).stdout == before.stdout)

            let usage = try Self.jsonArray(try await run(list + ["--couple", couple, "--json"]))
            let held = try #require(usage.first { $0["table"] as? String == "budget_scenarios" })
            #expect(held["max_rows"] as? Int == 1 && held["rows"] as? Int == 1)
            #expect(try await run(list + ["--couple", UUID().uuidString]).status == 3)
        }
    }

    @Test("budget: a scenario, items, an expense split to the cent, the overview; a viewer's edit is denied (exit 1)")
    func budget() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let base = ["--couple", couple]
            func budget(_ noun: String, _ verb: String, _ arguments: [String] = []) async throws -> Result {
                try await run(["budget", noun, verb] + arguments + base)
            }
            let unplanned = try await budget("items", "list")
            #expect(
                unplanned.status == 3 && unplanned.stderr.contains("no primary scenario: name one with --scenario"),
                "without --scenario, the primary one; with none, not found: \(unplanned.stderr)")
            let scenario = try await budget("scenarios", "add", ["Main", "--primary", "--json"])
            #expect(scenario.status == 0, "\(scenario.stderr)")
            let scenarioID = try #require(try Self.json(scenario)["id"] as? String, "a write prints what it wrote")
            #expect(
                try Self.json(scenario)["is_primary"] as? Bool == true,
                "--json names fields as the HTTP API does, in snake_case")
            var items: [String] = []
            for name in ["Venue", "Food", "Music"] {
                let item = try await budget(
                    "items", "add", [name, "--scenario", scenarioID, "--budgeted", "500", "--json"])
                items.append(try #require(try Self.json(item)["id"] as? String))
            }
            let listed = try await budget("items", "list", ["--scenario", scenarioID, "--json"])
            // One page at a time, a slice of the listing (by name); a full page says on stderr how to get the next.
            let firstPage = try await budget("items", "list", ["--scenario", scenarioID, "--limit", "2", "--json"])
            let firstIDs = try Self.jsonArray(firstPage).compactMap { $0["id"] as? String }
            #expect(firstIDs == [items[1], items[2]], "Food and Music, before Venue")
            #expect(try Self.place(firstPage).hasPrefix(firstIDs[1] + "."), "\(firstPage.stderr)")
            for after in [try Self.place(firstPage), firstIDs[1]] {
                let lastPage = try await budget(
                    "items", "list", ["--scenario", scenarioID, "--limit", "2", "--after", after, "--json"])
                #expect(
                    try Self.jsonArray(lastPage).compactMap { $0["id"] as? String } == [items[0]]
                        && lastPage.stderr.isEmpty,
                    "Venue, after the place the hint names or the id alone: \(lastPage.stderr)")
            }
            let pagedWrite = try await budget(
                "items", "add", ["Cake", "--scenario", scenarioID, "--budgeted", "1", "--limit", "2"])
            #expect(pagedWrite.status == 2, "a write takes no paging options")
            for (amount, message) in [
                ("3000.555", "--budgeted must be in whole cents (3000.555)"),
                ("-5", "--budgeted must not be negative (-5)"), ("5e3", "--budgeted \"5e3\" is not an amount"),
            ] {
                let refused = try await budget(
                    "items", "add", ["Cake", "--scenario", scenarioID, "--budgeted", amount])
                #expect(refused.status == 2, "a malformed amount is a usage error")
                #expect(refused.stderr.hasPrefix("rbac: \(message)"), "\(refused.stderr)")
            }
            #expect(
                try await budget("items", "list", ["--scenario", scenarioID, "--json"]).stdout == listed.stdout,
                "refused amounts add nothing")
            let expense = try await budget("expenses", "add", ["Deposit", "--amount", "100.00", "--json"])
            let expenseID = try #require(try Self.json(expense)["id"] as? String)
            let allocate = try await budget(
                "expenses", "allocate", [expenseID, "--scenario", scenarioID] + items.flatMap { ["--item", $0] })
            #expect(allocate.status == 0, "\(allocate.stderr)")
            #expect(allocate.stdout.contains("33.34") && allocate.stdout.contains("33.33"))
            let overview = try await budget("overview", "--scenario", [scenarioID])
            #expect(overview.stdout.contains("total  1500.00"), "\(overview.stdout)")
            #expect(try await budget("expenses", "add", ["X", "--amount", "-1"]).status == 2)
            #expect(try await budget("overview", "--scenario", ["nope"]).status == 2)
            #expect(try await run(["users", "add", "--email", "vic@example.com"]).status == 0)
            #expect(
                try await run(["grant", "--couple", couple, "--user", "vic@example.com", "--role", "viewer"]).status
                    == 0)
            let before = try await budget("expenses", "list", ["--json"])
            let refused = try await budget("expenses", "add", ["Y", "--amount", "5", "--actor", "vic@example.com"])
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("expenses.edit"))
            #expect(try await budget("expenses", "list", ["--json"]).stdout == before.stdout)
            let paid = try await budget("payments", "add", [expenseID, "--amount", "40", "--json"])
            let paymentID = try #require(try Self.json(paid)["id"] as? String, "\(paid.stderr)")
            let statuses = try await budget("payments", "status", ["--json"])
            #expect((try Self.jsonArray(statuses).first)?["status"] as? String == "partial")
            // The budget's history, with who made each change and what it changed.
            let audit = try await run(["audit"] + base).stdout.split(separator: "\n")
            func logged(_ action: String, _ change: String) -> Bool {
                audit.contains { $0.contains(" \(action) ") && $0.contains(change) }
            }
            #expect(logged("expense.insert", "name=Deposit amount=100.00"), "\(audit)")
            #expect(logged("allocation.insert", "amount=33.34"))
            #expect(logged("payment.insert", "amount=40.00"))
            #expect(!audit.contains { $0.contains("name=Y") }, "the refused expense left no trace")
            // Only the newest entries, still oldest first.
            let ids = try Self.jsonArray(try await run(["audit"] + base + ["--json"])).map { $0["id"] as? Int }
            let tail = try Self.jsonArray(try await run(["audit"] + base + ["--tail", "2", "--json"]))
            #expect(ids.count > 2 && tail.map { $0["id"] as? Int } == Array(ids.suffix(2)))
            // Paging back: while older entries remain, stderr names the --before of the page before.
            let tailText = try await run(["audit"] + base + ["--tail", "2"])
            #expect(tailText.stderr == "rbac: older entries remain: --before \(ids[ids.count - 2]!)\n")
            var paged: [Int?] = []
            var cursor: [String] = []
            for _ in ids {
                let page = try await run(["audit"] + base + ["--tail", "2", "--json"] + cursor)
                paged.insert(contentsOf: try Self.jsonArray(page).map { $0["id"] as? Int }, at: 0)
                guard let next = try Self.next("next_before", of: page) as? Int else { break }
                #expect(next == paged.first!, "the first entry shown")
                cursor = ["--before", String(next)]
            }
            #expect(paged == ids, "the pages make the whole log")
            let unknownEntry = try await run(["audit"] + base + ["--before", "99999999"])
            #expect(
                unknownEntry.status == 3 && unknownEntry.stderr.contains("no audit entry 99999999 in this couple's log")
            )
            let noTail = try await run(["audit"] + base + ["--tail", "0"])
            #expect(noTail.status == 2 && noTail.stderr.contains("--tail must be at least 1"), "\(noTail.stderr)")
            // Editing an expense: a due date in the past makes the partly paid expense overdue; removing it, not.
            let edited = try await budget("expenses", "edit", [expenseID, "--due", "2020-01-01", "--vendor", "Castle"])
            #expect(edited.status == 0 && edited.stdout.contains("Castle") && edited.stdout.contains("2020-01-01"))
            #expect(try await budget("payments", "status").stdout.contains("2020-01-01  yes"))
            #expect(try await budget("expenses", "edit", [expenseID, "--no-due"]).status == 0)
            #expect(!(try await budget("payments", "status").stdout.contains("yes")))
            let nothing = try await budget("expenses", "edit", [expenseID])
            #expect(nothing.status == 2 && nothing.stderr.contains("give what to change"), "\(nothing.stderr)")
            #expect(try await budget("expenses", "edit", [expenseID, "--due", "2020-13-01"]).status == 2)
            // Changing the amount scales its allocations, and prints them.
            let scaled = try await budget("expenses", "set-amount", [expenseID, "--amount", "200", "--json"])
            let cents = try Self.jsonArray(scaled).compactMap {
                ($0["amount"] as? NSNumber).map { Int(($0.doubleValue * 100).rounded()) }
            }
            #expect(cents.count == 3 && cents.reduce(0, +) == 20_000, "they add up to the new amount: \(scaled.stdout)")
            // One expense's payments, with their ids; one deleted.
            let recorded = try await budget("payments", "list", ["--expense", expenseID, "--json"])
            #expect((try Self.jsonArray(recorded).first)?["id"] as? String == paymentID)
            #expect(try await budget("payments", "delete", [paymentID]).status == 0)
            #expect(try await budget("payments", "list", ["--expense", expenseID]).stdout == "ID  AMOUNT  PAID\n")
            #expect(try await budget("payments", "add", ["--amount", "5"]).status == 2, "which expense?")
            let unknown = try await budget("payments", "list", ["--expense", UUID().uuidString])
            #expect(unknown.status == 3 && unknown.stderr == "rbac: no such expense in this couple\n")
            // Deleting: not for a viewer (exit 1), once for the operator (then exit 3), and in the audit log.
            let delete = ["budget", "expenses", "delete", expenseID] + base
            #expect(try await run(delete + ["--actor", "vic@example.com"]).status == 1)
            let deleted = try await run(delete)
            #expect(deleted.status == 0 && deleted.stdout == "Deleted expense \(expenseID)\n", "\(deleted.stderr)")
            #expect(try await budget("payments", "status", ["--json"]).stdout == "[]\n")
            let again = try await run(delete)
            #expect(again.status == 3 && again.stderr == "rbac: no such expense in this couple\n", "\(again.stderr)")
            #expect(try await run(["budget", "dinners", "delete", expenseID] + base).status == 2)
            #expect(try await run(["audit"] + base).stdout.contains(" expense.delete "))
            // Gifts: added against an item, listed with their ids, edited, received, deleted by id.
            let gift = try await budget(
                "gifts", "add", ["Aunt May", "--amount", "250", "--received", "--item", items[0]])
            #expect(gift.status == 0 && gift.stdout.contains("Aunt May") && gift.stdout.contains(items[0]))
            let gifts = try Self.jsonArray(try await budget("gifts", "list", ["--json"]))
            let giftID = try #require(gifts.first?["id"] as? String)
            #expect(gifts.count == 1 && gifts.first?["received"] as? Bool == true)
            #expect(try await budget("gifts", "add", ["X"]).status == 2, "an amount is needed")
            let owed = try await budget("gifts", "edit", [giftID, "--owed", "--no-item"])
            #expect(owed.status == 0 && !owed.stdout.contains("yes") && !owed.stdout.contains(items[0]))
            #expect(try await budget("gifts", "edit", [giftID, "--item", items[0], "--no-item"]).status == 2)
            let cameIn = try await budget("gifts", "receive", [giftID, "--json"])
            #expect(try Self.json(cameIn)["received"] as? Bool == true, "\(cameIn.stderr)")
            #expect(try await budget("gifts", "delete", [giftID]).status == 0)
            #expect(try await budget("gifts", "list", ["--json"]).stdout == "[]\n")
            // Folders: one added, an item filed in it; then the events and categories items are grouped by.
            let folder = try await budget("folders", "add", ["Party", "--scenario", scenarioID, "--json"])
            let folderID = try #require(try Self.json(folder)["id"] as? String)
            let filed = try await budget(
                "items", "add",
                [
                    "Cake", "--scenario", scenarioID, "--budgeted", "300", "--folder", folderID, "--category", "Food",
                    "--event", "Reception",
                ])
            #expect(filed.status == 0 && filed.stdout.contains(folderID), "\(filed.stderr)")
            #expect(try await budget("folders", "list", ["--scenario", scenarioID]).stdout.contains("Party"))
            let loose = try await budget("folders", "add", ["Loose", "--json"])
            #expect(try Self.json(loose)["scenario_id"] as? String == scenarioID, "the primary's: \(loose.stderr)")
            // Renames: the folder and the scenario; rename without --name is a usage error.
            let refiled = try await budget("folders", "rename", [folderID, "--name", "Party Time"])
            #expect(refiled.status == 0 && refiled.stdout.contains("Party Time"), "\(refiled.stderr)")
            let renamed = try await budget("scenarios", "rename", [scenarioID, "--name", "Dream", "--json"])
            #expect(try Self.json(renamed)["name"] as? String == "Dream", "\(renamed.stderr)")
            #expect(try await budget("scenarios", "rename", [scenarioID]).status == 2)
            #expect(
                try await budget("folders", "rename", [UUID().uuidString, "--name", "X"]).status == 3,
                "an unknown folder is not found")
            let grouping = try await run(["budget", "categories"] + base)
            #expect(grouping.stdout == "KIND      NAME\nevent     Reception\ncategory  Food\n", "\(grouping.stdout)")
            let moved = try await budget("items", "edit", [items[1], "--folder", folderID, "--name", "Catering"])
            #expect(
                moved.status == 0 && moved.stdout.contains("Catering") && moved.stdout.contains(folderID),
                "\(moved.stderr)")
            let unfiled = try await budget("items", "edit", [items[1], "--no-folder", "--json"])
            #expect(unfiled.status == 0, "\(unfiled.stderr)")
            #expect(try Self.json(unfiled)["folder_id"] == nil)
            let resplit = try await budget("items", "set-budget", [items[0], "--budgeted", "1000", "--json"])
            #expect(resplit.status == 0, "\(resplit.stderr)")
            #expect(
                try await budget("items", "list").stdout
                    == (try await budget("items", "list", ["--scenario", scenarioID])).stdout,
                "a listing without --scenario is the primary scenario's")
            // A clone is a new scenario; the primary one cannot be deleted, the clone can.
            let clone = try await budget("scenarios", "clone", [scenarioID, "--name", "Plan B", "--json"])
            let cloneID = try #require(try Self.json(clone)["id"] as? String, "\(clone.stderr)")
            #expect(try await budget("scenarios", "delete", [scenarioID]).status == 4)
            #expect(try await budget("scenarios", "delete", [cloneID]).status == 0)
        }
    }

    @Test("without --scenario: a role that edits the budget unseen adds to the primary; allocate, in the items'")
    func budgetWithoutScenario() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let base = ["--couple", couple]
            func budget(_ noun: String, _ verb: String, _ arguments: [String]) async throws -> Result {
                try await run(["budget", noun, verb] + arguments + base)
            }
            func id(_ result: Result) throws -> String {
                try #require(try Self.json(result)["id"] as? String, "\(result.stderr)")
            }
            let main = try id(try await budget("scenarios", "add", ["Main", "--primary", "--json"]))
            let planB = try id(try await budget("scenarios", "add", ["Plan B", "--json"]))
            for (email, role, permissions) in [
                ("clerk@example.com", "clerk", ["budget.edit", "expenses.edit"]),
                ("aunt@example.com", "aunt", ["gifts.edit"]),
            ] {
                let created = try await run(
                    ["roles", "create", "--name", role, "--description", role] + base
                        + permissions.flatMap { ["--permission", $0] })
                #expect(created.status == 0, "\(created.stderr)")
                #expect(try await run(["users", "add", "--email", email]).status == 0)
                #expect(try await run(["grant", "--user", email, "--role", role] + base).status == 0)
            }
            let clerk = ["--actor", "clerk@example.com"]
            let added = try await budget("items", "add", ["Venue", "--budgeted", "500", "--json"] + clerk)
            #expect(try Self.json(added)["scenario_id"] as? String == main, "\(added.stderr)")
            let refused = try await budget("items", "add", ["Cake", "--budgeted", "5", "--actor", "aunt@example.com"])
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr == "rbac: permission denied: this needs budget.view or budget.edit in the couple\n")

            let other = try id(
                try await budget("items", "add", ["Barn", "--scenario", planB, "--budgeted", "50", "--json"]))
            let expense = try id(try await budget("expenses", "add", ["Deposit", "--amount", "100", "--json"]))
            let allocated = try await budget("expenses", "allocate", [expense, "--item", other, "--json"] + clerk)
            #expect(allocated.status == 0, "\(allocated.stderr)")
            #expect(try Self.jsonArray(allocated).map { $0["scenario_id"] as? String } == [planB])
            let split = try await budget("expenses", "allocate", [expense, "--item", other, "--item", try id(added)])
            #expect(split.status == 3, "\(split.stderr)")
            #expect(split.stderr == "rbac: every budget item must exist, all in one scenario\n")
            let none = try await budget("expenses", "allocate", [expense])
            #expect(none.status == 2 && none.stderr.contains("Missing expected argument '--item"), "\(none.stderr)")
            let elsewhere = try await budget("expenses", "allocate", [expense, "--item", other, "--scenario", main])
            #expect(elsewhere.status == 3 && elsewhere.stderr.contains("must belong to the scenario"))
            let overview = try Self.json(try await run(["budget", "overview", "--scenario", planB, "--json"] + base))
            let spent = (overview["items"] as? [[String: Any]])?.map { $0["spent"] as? Int }
            #expect(spent == [100], "the refusals left the allocation as it was: \(overview)")
        }
    }

    @Test("invite, redeem (the link as an argument or on stdin): a member with the role; malformed exits 2, again 4")
    func inviteAndRedeem() async throws {
        try await Self.withDatabase { run, configuration in
            let couple = try await Self.createCouple(run)
            #expect(try await run(["users", "add", "--email", "paul@example.com"]).status == 0)
            // A base URL links could not open from: a usage error, and no invitation is made.
            for base in ["rbac.test", "ftp://rbac.test", "https://rbac.test/?via=mail", "https://"] {
                let refused = try await Self.rbac(
                    ["invite", "--couple", couple, "--role", "partner"], database: configuration.connectionString,
                    environment: ["RBAC_PUBLIC_URL": base])
                #expect(refused.status == 2, "\(base): \(refused.stderr)")
                #expect(refused.stderr.contains("RBAC_PUBLIC_URL must be an absolute http(s) URL"), "\(refused.stderr)")
            }
            let none = try await run(["invitations", "list", "--couple", couple, "--json"])
            #expect(try Self.jsonArray(none).isEmpty, "\(none.stdout) \(none.stderr)")
            let invite = try await run(["invite", "--couple", couple, "--role", "partner", "--json"])
            #expect(invite.status == 0, "\(invite.stderr)")
            let link = try #require(try Self.json(invite)["link"] as? String)
            #expect(link.hasPrefix("https://rbac.test/invitations/inv_"))
            // A link cut short, or something that is no token at all: a usage error that repeats none of it.
            let token = String(link.split(separator: "/").last!)
            for malformed in [String(link.dropLast()), String(token.dropLast()), "inv_", "", "https://rbac.test/"] {
                let refused = try await run(["redeem", malformed, "--user", "paul@example.com"])
                #expect(refused.status == 2, "\(malformed): \(refused.stderr)")
                #expect(refused.stderr.contains("not an invitation token"), "\(refused.stderr)")
                #expect(!refused.stderr.contains(token.dropFirst(4).prefix(12)), "no part of the token is echoed")
            }
            let redeem = try await run(["redeem", link, "--user", "paul@example.com"])
            #expect(redeem.status == 0, "\(redeem.stderr)")
            let check = try await run([
                "check", "--couple", couple, "--user", "paul@example.com", "--permission", "audit.view",
            ])
            #expect(check.status == 0)
            // Again, the link read from standard input (`-`): found, and already accepted.
            let again = try await ChildProcess.run(
                "/bin/sh",
                [
                    "-c", #"printf '%s\n' "$1" | exec "$0" redeem - --user paul@example.com"#, Self.executable.path,
                    link,
                ],
                environment: ProcessInfo.processInfo.environment.merging(
                    ["DATABASE_URL": configuration.connectionString]) { $1 })
            #expect(again.status == 4, "\(again.errorOutput)")
            #expect(again.errorOutput.contains("already accepted"))
            #expect(!again.errorOutput.contains(token), "the token never appears in an error")
            let audit = try await run(["audit", "--couple", couple])
            #expect(audit.status == 0)
            #expect(audit.stdout.contains("invitation.update") && audit.stdout.contains("membership.insert"))
        }
    }

    @Test("migrate --citus distributes on Citus; elsewhere it is refused, saying why, and applies nothing")
    func migrateCitus() async throws {
        try await TestDatabase.withFresh { configuration in
            let database = configuration.connectionString
            // Alone, as every set-up on Citus (TestDatabase.settingUp).
            let migrated = try await TestDatabase.settingUp {
                try await Self.rbac(["migrate", "--citus"], database: database)
            }
            let connection = try await PostgresConnection.connect(configuration)
            if TestDatabase.citusWorkers.isEmpty {
                #expect(migrated.status != 0 && migrated.stderr.contains("this database has no citus extension"))
                let tables = try await connection.query(
                    """
                    SELECT count(*)::int AS n FROM pg_tables
                    WHERE schemaname = 'public' AND tablename NOT IN ('schema_migrations', 'schema_definitions')
                    """)
                #expect(
                    try tables[0].decode("n", as: Int.self) == 0, "the migrations rolled back with the distribution")
            } else {
                #expect(migrated.status == 0, "\(migrated.stderr)")
                let distributed = try await connection.query(
                    "SELECT count(*)::int AS n FROM pg_dist_partition WHERE partmethod = 'h'")
                #expect(try distributed[0].decode("n", as: Int.self) == 10, "the audit log and nine budget tables")
            }
            await connection.close()
            let both = try await Self.rbac(
                ["migrate", "--citus", "--status"], database: configuration.connectionString)
            #expect(both.status == 2 && both.stderr.contains("give --status or --citus, not both"))
        }
    }

    /// An `RBAC_HOME` of a release with one more migration: this project's `sql/` and `policies/`, and `sql`
    /// as `sql/0999_<name>.sql`. Removed when `body` returns.
    private static func withNextRelease(
        migration name: String, _ sql: String, _ body: (_ home: URL) async throws -> Void
    ) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-home-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        for directory in ["sql", "policies"] {
            try FileManager.default.copyItem(
                at: repositoryRoot.appendingPathComponent(directory), to: home.appendingPathComponent(directory))
        }
        try Data(sql.utf8).write(to: home.appendingPathComponent("sql/0999_\(name).sql"))
        try await body(home)
    }

    @Test("a migration that fails is named with what it raised and its hint; exit 4, and nothing is applied")
    func failingMigration() async throws {
        // A release whose last migration refuses the database.
        try await Self.withNextRelease(
            migration: "refuses",
            "DO $$ BEGIN RAISE EXCEPTION 'a row stops this' USING HINT = 'delete it, then migrate again'; END $$;\n"
        ) { home in
            try await TestDatabase.withFresh { configuration in
                let migrated = try await TestDatabase.settingUp {
                    try await Self.rbac(
                        Self.migrate, database: configuration.connectionString, environment: ["RBAC_HOME": home.path])
                }
                #expect(migrated.status == 4)
                #expect(
                    migrated.stderr.contains(
                        "rbac: applying 0999_refuses.sql failed, so nothing was applied: a row stops this; "
                            + "delete it, then migrate again\n"), "\(migrated.stderr)")
                let connection = try await PostgresConnection.connect(configuration)
                let tables: Int = try await connection.query(
                    "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public' AND tablename = 'couples'"
                )[0].decode("n")
                await connection.close()
                #expect(tables == 0, "the migrations before it rolled back with it")
            }
        }
    }

    @Test("migrate and policy apply give up on a lock held past --lock-timeout: exit 5, and the run changes nothing")
    func migrationLockTimeout() async throws {
        try await Self.withNextRelease(migration: "adds", "ALTER TABLE memberships ADD COLUMN probe int;\n") { home in
            try await TestDatabase.withFresh { configuration in
                let database = configuration.connectionString
                func run(_ arguments: [String]) async throws -> Result {
                    try await Self.rbac(arguments, database: database, environment: ["RBAC_HOME": home.path])
                }
                let first = try await TestDatabase.settingUp {
                    try await Self.rbac(Self.migrate, database: database)
                }
                #expect(first.status == 0, "\(first.stderr)")
                let holder = try await PostgresConnection.connect(configuration)
                defer { Task { await holder.close() } }
                let probe =
                    "SELECT count(*)::int AS n FROM pg_attribute WHERE attrelid = 'memberships'::regclass "
                    + "AND attname = 'probe'"
                let policyAppliedAt = "SELECT applied_at::text AS t FROM applied_policy"
                let appliedAt: String = try await holder.query(PostgresQuery(unsafeSQL: policyAppliedAt))[0].decode("t")
                let advice =
                    "; try again once that session has ended (pg_stat_activity shows it), or give a longer --lock-timeout"
                /// `arguments` with --lock-timeout 200ms, run while a transaction that read `table` stays open.
                func whileReading(_ table: String, _ arguments: [String]) async throws -> Result {
                    try await holder.execute("BEGIN")
                    try await holder.execute(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"))
                    return try await run(arguments + ["--lock-timeout", "200ms"])
                }
                func refusal(_ doing: String, _ undone: String) -> String {
                    "\(doing) waited longer than --lock-timeout (200ms) for a lock another session holds, so \(undone)"
                        + advice
                }
                func expectRefused(_ result: Result, _ doing: String, so undone: String) {
                    #expect(result.status == 5)
                    #expect(result.stderr.hasSuffix("rbac: \(refusal(doing, undone))\n"), "\(result.stderr)")
                }

                // The migration's ALTER TABLE waits for a transaction that read memberships.
                expectRefused(
                    try await whileReading("memberships", Self.migrate), "applying 0999_adds.sql",
                    so: "nothing was applied")
                try await holder.execute("ROLLBACK")
                #expect(try await holder.query(PostgresQuery(unsafeSQL: probe))[0].decode("n", as: Int.self) == 0)

                // The migration (memberships, triggers) goes ahead of a transaction that read couples; the policy's
                // row-level security scripts, which the migration marked stale, wait for it.
                expectRefused(
                    try await whileReading("couples", Self.migrate), "applying the access policy",
                    so: "only the migrations were")
                let applyBlocked = try await run(["policy", "apply", "--lock-timeout", "200ms", "--json"])
                #expect(applyBlocked.status == 5)
                let refused = try JSONSerialization.jsonObject(with: Data(applyBlocked.stderr.utf8)) as? [String: Any]
                let error = try #require(refused?["error"] as? [String: Any], "\(applyBlocked.stderr)")
                #expect(error["code"] as? String == "unavailable")
                #expect(
                    error["message"] as? String == refusal("applying the access policy", "it was not"), "\(error)")
                try await holder.execute("ROLLBACK")
                #expect(try await holder.query(PostgresQuery(unsafeSQL: probe))[0].decode("n", as: Int.self) == 1)
                #expect(
                    try await holder.query(PostgresQuery(unsafeSQL: policyAppliedAt))[0].decode("t") == appliedAt,
                    "the policy was not applied")
                let policyState = {
                    try Self.jsonArray(try await run(["migrate", "--status", "--json"])).last
                        .map { "\($0["file_name"] ?? "") \($0["state"] ?? "")" }
                }
                #expect(try await policyState() == "policies/ pending")

                // With the lock gone, a run with no migration left still applies the policy's stale scripts.
                let applied = try await run(Self.migrate + ["--lock-timeout", "200ms"])
                #expect(applied.status == 0, "\(applied.stderr)")
                // The policy, whatever else the run applies (on Citus, --citus runs the distribution again).
                #expect(applied.stdout.contains(" and the access policy; "), "\(applied.stdout)")
                #expect(
                    try await holder.query(PostgresQuery(unsafeSQL: policyAppliedAt))[0].decode("t") != appliedAt)
                #expect(try await policyState() == "policies/ applied")
            }
        }
    }

    @Test("the operator's log: keys, limits, users, the policy, under the OS user or --actor-label; never a secret")
    func operatorAudit() async throws {
        try await TestDatabase.withFresh { configuration in
            let database = configuration.connectionString
            func run(_ arguments: [String], user: String = "ops", logname: String = "ops") async throws -> Result {
                try await Self.rbac(arguments, database: database, environment: ["USER": user, "LOGNAME": logname])
            }
            let migrated = try await TestDatabase.settingUp {
                try await Self.rbac(Self.migrate, database: database, environment: ["USER": "ops", "LOGNAME": "ops"])
            }
            #expect(migrated.status == 0, "\(migrated.stderr)")
            let roles = try Self.jsonArray(try await run(["roles", "--json"])).count
            #expect(try Self.json(try await run(["policy", "apply", "--json"]))["roles"] as? Int == roles && roles > 0)
            let created = try await run(["keys", "create", "--name", "billing", "--json"], user: "ops lead\\x")
            let secret = try #require(try Self.json(created)["secret"] as? String)
            let key = try #require((try Self.json(created)["key"] as? [String: Any])?["id"] as? String)
            let revoked = try Self.json(
                try await run(["keys", "revoke", key, "--actor-label", "deploy-bot", "--json"]))
            #expect(revoked["id"] as? String == key && revoked["revoked_at"] is String, "\(revoked)")
            let again = try await run(["keys", "revoke", key])
            #expect(
                again.status == 0
                    && again.stdout.contains(
                        "The key \(key) \"billing\" was revoked already, at \(revoked["revoked_at"] ?? "")"),
                "\(again.stdout)")
            #expect(try await run(["budget", "limits", "set", "expenses=1234"]).status == 0)
            #expect(try await run(["users", "add", "--email", "rita@example.com", "--actor-label", "hr"]).status == 0)
            let couple = ["couples", "create", "--name", "R & S", "--owner-email", "sam@example.com"]
            #expect(try await run(couple + ["--actor-label", "support"]).status == 0)

            let log = try await run(["audit", "--operator", "--json"])
            #expect(!log.stdout.contains(secret) && !log.stdout.contains("key_hash"))
            let entries = try Self.jsonArray(log).map { "\($0["actor"] ?? "") \($0["action"] ?? "")" }
            #expect(entries.contains("operator:ops role.insert"), "migrate installed the policy: \(entries)")
            #expect(
                entries.suffix(5) == [
                    "operator:ops lead\\x service_key.insert", "operator:deploy-bot service_key.update",
                    "operator:ops row_limit.update", "operator:hr user.insert", "operator:support user.insert",
                ])
            let table = try await run(["audit", "--operator", "--tail", "4"]).stdout
            #expect(table.contains("service_key.update  name=billing revoked_at null→"), "\(table)")
            #expect(table.contains("row_limit.update    table_name=expenses max_rows 100000→1234"), "\(table)")
            #expect(table.contains("operator:hr          user.insert         email=rita@example.com\n"), "\(table)")
            // The page before the last two entries, as the table's ids and stderr name it.
            let lastTwo = try Self.jsonArray(try await run(["audit", "--operator", "--tail", "2", "--json"]))
            let first = try #require(lastTwo.first?["id"] as? Int)
            #expect(try await run(["audit", "--operator", "--tail", "2"]).stderr.contains("--before \(first)\n"))
            let older = try await run(["audit", "--operator", "--tail", "1", "--before", String(first), "--json"])
            #expect(try Self.jsonArray(older).map { $0["action"] as? String } == ["row_limit.update"], "\(older)")
            #expect(table.contains("\n\(first) "), "the table shows ids: \(table)")
            let unknown = try await run(["audit", "--operator", "--before", "99999999"])
            #expect(unknown.status == 3 && unknown.stderr.contains("no audit entry 99999999 in the operator's log"))

            // Usage errors (exit 2), with what to give instead; a malformed --actor is one too.
            let refusals = [
                ["audit"]: "give --couple C for a couple's log, or --operator",
                ["audit", "--operator", "--couple", key]: "give --couple or --operator, not both",
                ["audit", "--operator", "--actor", "ana@example.com"]: "--actor does not apply to the operator's log",
                ["audit", "--operator", "--actor", "x"]: "\"x\" is neither a user id (UUID) nor an email address",
                ["audit", "--operator", "--before", "0"]: "--before must be an entry's id, not 0",
                ["keys", "create", "--name", "b", "--actor-label", ""]:
                    "--actor-label must have 1 to 100 characters, not 0",
                ["keys", "create", "--name", "b", "--actor-label", String(repeating: "x", count: 101)]:
                    "--actor-label must have 1 to 100 characters, not 101",
                ["budget", "limits", "set", "expenses=1", "--actor-label", "ops\nkey.delete"]:
                    "--actor-label must not contain control characters",
                ["users", "add", "--email", "eve\u{1B}]0;pwned\u{07}@example.com"]:
                    #""eve\u{1B}]0;pwned\u{7}@example.com" is not an email address: it holds a control character"#,
                ["users", "add", "--email", "eve@example.com", "--name", "Eve\u{1B}[2J"]:
                    "the display name must not contain control characters",
                ["keys", "create", "--name", "billing\u{1B}[2J"]: "a key's name must not contain control characters",
                ["keys", "create", "--name", "\u{2060}"]: "a key's name must show something",
                ["couples", "create", "--name", "\u{3164}", "--owner-email", "a@example.com"]:
                    "a couple's name must show something, not only spaces and invisible characters",
                // Lengths as the tables count them, in Unicode scalars: each of these is half its limit in characters.
                ["keys", "create", "--name", accented(101)]: "a key's name must be 1 to 100 characters, not 101",
                ["users", "add", "--email", "eve@example.com", "--name", accented(201)]:
                    "the display name must be 1 to 200 characters",
                ["users", "add", "--email", "eve@example.com", "--identity", "https://id.example", accented(256)]:
                    "an identity's subject must have 1 to 255 characters",
                ["couples", "create", "--name", accented(201), "--owner-email", "a@example.com"]:
                    "a couple's name must be 1 to 200 characters",
                ["couples", "list", "--database-url", "postgres://bob:S3cretPw@[::1"]:
                    #""postgres://bob:[redacted]@[::1""#,
                ["couples", "list", "--database-url", "postgres://bob:S3cret/Pw@db/x"]:
                    "write a '/' in the user or password as %2F",
                ["couples", "list", "--database-url", " "]: "invalid database URL: it is blank",
                ["couples", "list", "--database-url", "postgres://bob@db/x?sslmode=bogus"]:
                    #"invalid database URL or PG* variable: invalid sslmode value: "bogus""#,
                // serve waits for a database that does not answer yet, but not for settings that never reach one.
                ["serve", "--port", "1", "--database-url", "postgres://bob@db/x?sslmode=bogus"]:
                    #"invalid database URL or PG* variable: invalid sslmode value: "bogus""#,
                // The process list shows a command's arguments to everyone.
                ["couples", "list", "--database-url", "postgres://bob:S3cretPw@db/x"]:
                    "--database-url must not carry a password, which the process list shows",
                ["serve", "--port", "1", "--database-url", "host=db password=S3cretPw"]:
                    "--database-url must not carry a password, which the process list shows",
                [
                    "couples", "create", "--name", "N", "--owner-email", "a@example.com", "--actor", "a@example.com",
                    "--actor-label", "bot",
                ]: "give --actor or --actor-label, not both",
            ]
            for (arguments, message) in refusals {
                let result = try await run(arguments)
                #expect(result.status == 2 && result.stderr.contains(message), "\(arguments): \(result.stderr)")
            }
            // DATABASE_URL may carry one, and a refusal of the URL never shows it.
            let bogus = try await Self.rbac(
                ["couples", "list"], database: "postgres://bob:S3cretPw@db/x?sslmode=bogus")
            #expect(
                bogus.status == 2 && bogus.stderr.contains(#"invalid sslmode value: "bogus""#)
                    && !bogus.stderr.contains("S3cret"), "\(bogus.stderr)")
            // An invitation link given where something else belongs is refused without being echoed, by rbac's
            // own messages and ArgumentParser's, in either format: standard error is often kept in a log.
            let token = "inv_" + String(repeating: "Q", count: 42) + "A"
            let link = "https://invite.example/invitations/\(token)"
            for arguments in [
                ["couples", "delete", link, "--yes"], ["members", "--couple", UUID().uuidString, "--limit", link],
            ] {
                for format in [[], ["--json"]] {
                    let result = try await run(arguments + format)
                    #expect(
                        result.status == 2 && result.stderr.contains("inv_[redacted]")
                            && !result.stderr.contains(token.dropFirst(4).prefix(16)),
                        "\(arguments + format): \(result.stderr)")
                }
            }
            // A refusal from SQL that quotes what was typed shows its control characters escaped.
            let couples = try Self.jsonArray(try await run(["couples", "list", "--json"]))
            let coupleID = try #require(couples.first?["id"] as? String)
            let escaped = try await run(["couples", "set", coupleID, "--invite-domains", "x\u{1B}[2J.com"])
            #expect(
                escaped.status == 2 && escaped.stderr.contains(#"not a domain: 'x\u{1B}[2J.com'"#)
                    && !escaped.stderr.contains("\u{1B}"), "\(escaped.stderr)")
            // An unknown --actor is refused before the new owner is added.
            let unknownActor = try await run(
                [
                    "couples", "create", "--name", "N", "--owner-email", "ned@example.com", "--actor",
                    "nobody@example.com",
                ])
            #expect(unknownActor.status == 3, "\(unknownActor.stderr)")
            #expect(!(try await run(["users", "list"]).stdout.contains("ned@example.com")))
            // The refused writes changed nothing.
            #expect(try Self.jsonArray(try await run(["keys", "list", "--json"])).count == 1)
            #expect(try Self.jsonArray(try await run(["couples", "list", "--json"])).count == 1)
            #expect(try await run(["audit", "--operator", "--json"]).stdout == log.stdout)

            // Without USER and LOGNAME (cron, systemd), or with names --actor-label would refuse, the user
            // database names the OS user.
            let account = try #require(getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) })
            #expect(try await run(["users", "add", "--email", "tom@example.com"], user: "", logname: "").status == 0)
            let long = String(repeating: "x", count: 101)
            let added = try await run(
                ["users", "add", "--email", "ty@example.com"], user: "ops\u{1B}[2J", logname: long)
            #expect(added.status == 0)
            let latest = try Self.jsonArray(try await run(["audit", "--operator", "--tail", "2", "--json"]))
            #expect(latest.map { "\($0["actor"] ?? "")" } == ["operator:\(account)", "operator:\(account)"])
        }
    }

    @Test("control characters raw SQL wrote are printed escaped, in tables, the audit log and messages")
    func controlCharactersEscaped() async throws {
        try await Self.withDatabase { run, configuration in
            let couple = try await Self.createCouple(run)
            let eve = UUID().uuidString.lowercased()
            // An email address cannot hold one (the database refuses it); a name can.
            let connection = try await PostgresConnection.connect(configuration)
            try await connection.execute(
                """
                INSERT INTO users (id, email, display_name)
                VALUES (\(eve)::uuid, 'eve@example.com', \("Eve\u{1B}[2J\u{7}\nrow"))
                """)
            try await connection.execute(
                "UPDATE couples SET name = \("Ours\u{1B}]0;pwned\u{7}") WHERE id = \(couple)::uuid")
            await connection.close()
            var printed: [([String], String)] = []
            for arguments in [
                ["users", "list"], ["audit", "--operator", "--tail", "1"],
                ["grant", "--couple", couple, "--user", eve, "--role", "viewer"], ["couples", "show", couple],
            ] {
                printed.append((arguments, try await run(arguments).stdout))
            }
            for (arguments, text) in printed {
                #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(arguments)")
            }
            #expect(printed[0].1.contains(#"Eve\u{1B}[2J\u{7}\u{A}row"#), "a cell keeps to its row")
            #expect(printed[1].1.contains(#"Eve\u{1B}[2J\u{7}\u{A}row"#), "\(printed[1].1)")
            #expect(printed[3].1.contains(#"Ours\u{1B}]0;pwned\u{7}"#), "\(printed[3].1)")
            #expect(printed[3].1.contains(#"Eve\u{1B}[2J"#), "\(printed[3].1)")
        }
    }

    @Test("serve refuses a public URL that links could not open from with exit 2, before it starts")
    func servePublicURL() async throws {
        try await Self.withDatabase { run, _ in
            for url in ["ftp://rbac.test", "rbac.test", "https://rbac.test/#top", "https://rbac:pa55word@rbac.test/"] {
                // No way to verify tokens is given: were the URL taken, serve would stop there, saying so.
                let serve = try await run(["serve", "--port", "1", "--public-url", url])
                #expect(serve.status == 2, "\(url): \(serve.stderr)")
                #expect(serve.stderr.contains("--public-url must be an absolute http(s) URL"), "\(serve.stderr)")
                #expect(serve.stderr.contains(url) != url.contains("pa55word"), "named, unless it holds a password")
            }
        }
    }

    @Test(
        """
        serve refuses a URL whose port no connection can use (0, past 65535, past any integer), or whose host has \
        an empty label or a % escape, with exit 2
        """)
    func serveURLServers() async throws {
        try await Self.withDatabase { run, configuration in
            let sending = ["--mail-from", "rbac@example.com"]
            let signingIn = ["--oidc-issuer", "https://id.example", "--oidc-client-id", "rbac"]
            let ports = ["0", "65536", "99999999999999999999"].map { (":\($0)", $0) }
            let hosts = [("..com", "without an empty label"), ("%2Ecom", "without % escapes")]
            for (typo, reason) in ports + hosts {
                for (option, url, others) in [
                    ("--public-url", "https://rbac.example\(typo)", []),
                    ("--smtp-url", "smtp://mail.example\(typo)", sending),
                    ("--cors-origin", "https://app.example\(typo)", []),
                    ("--jwks-url", "https://id.example\(typo)/jwks", []),
                    ("--oidc-issuer", "https://id.example\(typo)", ["--oidc-client-id", "rbac"]),
                    ("--app-url", "https://app.example\(typo)/", signingIn),
                ] {
                    let serve = try await run(["serve", "--port", "1", option, url] + others)
                    #expect(serve.status == 2, "\(option) \(url): \(serve.stderr)")
                    #expect(serve.stderr.contains(option) && serve.stderr.contains(reason), "\(serve.stderr)")
                }
            }
            let invite = try await Self.rbac(
                ["invite", "--couple", try await Self.createCouple(run), "--role", "viewer"],
                database: configuration.connectionString, environment: ["RBAC_PUBLIC_URL": "https://rbac.example:65536"]
            )
            #expect(invite.status == 2 && invite.stderr.contains("RBAC_PUBLIC_URL must name a port from 1 to 65535"))
        }
    }

    @Test(
        """
        serve refuses a forwarding header it does not know, one without a trusted proxy, or a proxy or metrics \
        client that is no address, with exit 2
        """)
    func serveForwardedHeader() async throws {
        try await Self.withDatabase { run, _ in
            for (arguments, message) in [
                (["--trusted-proxy", "10.0.0.0/8", "--forwarded-header", "X-Real-IP"], "X-Forwarded-For or Forwarded"),
                (["--forwarded-header", "Forwarded"], "--forwarded-header names the header of the proxies"),
                (["--trusted-proxy", "proxy.local"], #"--trusted-proxy takes an IP address or a CIDR range"#),
                (["--metrics-from", "10.0.0.0/33"], #"--metrics-from takes an IP address or a CIDR range such as "#),
            ] {
                let serve = try await run(["serve", "--port", "1"] + arguments)
                #expect(serve.status == 2, "\(arguments): \(serve.stderr)")
                #expect(serve.stderr.contains(message), "\(serve.stderr)")
            }
        }
    }

    @Test("serve on a port another socket holds exits 2, naming the address and the reason")
    func serveOnTakenPort() async throws {
        try await Self.withServeOnTakenPort { serveArguments, port in
            try await Self.withDatabase { run, configuration in
                let serve = try await run(serveArguments)
                #expect(serve.status == 2)
                #expect(
                    serve.stderr.hasSuffix("rbac: cannot listen on 127.0.0.1:\(port): address already in use\n"),
                    "\(serve.stderr)")
                // With nowhere to say it (standard error closed), the same exit, not a trap: serve ignores SIGPIPE
                // (NIO does), where a failed write to standard error may not stop the process.
                let unheard = try await ChildProcess.run(
                    "/bin/sh", ["-c", "exec \"$0\" \"$@\" 2>&-", Self.executable.path] + serveArguments,
                    environment: ProcessInfo.processInfo.environment.merging(
                        ["DATABASE_URL": configuration.connectionString]) { $1 })
                #expect(unheard.status == 2, "\(unheard.output)")
            }
        }
    }

    @Test(
        "on a database this release has not migrated, commands and serve exit 4 saying to migrate; a later one serves")
    func unmigratedDatabase() async throws {
        let migrations = try FileManager.default.contentsOfDirectory(
            atPath: repositoryRoot.appendingPathComponent("sql").path
        ).filter { $0.hasSuffix(".sql") }.sorted()
        try await Self.withServeOnTakenPort { serve, port in
            try await TestDatabase.withFresh { configuration in
                let run = { try await Self.rbac($0, database: configuration.connectionString) }
                let listed = try await run(["couples", "list"])
                #expect(listed.status == 4, "\(listed.stderr)")
                #expect(listed.stderr.contains("lacks part of rbac's schema (relation \"couples\" does not exist)"))
                #expect(
                    listed.stderr.hasSuffix("run `rbac migrate` (`rbac migrate --status` lists what is pending)\n"))
                // A budget write begins with a function of the rbac schema, which is missing too.
                let primary = try await run([
                    "budget", "scenarios", "make-primary", UUID().uuidString, "--couple", UUID().uuidString,
                ])
                #expect(primary.status == 4, "\(primary.stderr)")
                #expect(primary.stderr.contains("lacks part of rbac's schema (schema \"rbac\" does not exist)"))
                let empty = try await run(serve)
                let lacking = "lacks \(migrations.count) migrations of this release, from \(migrations[0]) on"
                #expect(empty.status == 4, "\(empty.stderr)")
                #expect(empty.stderr.hasSuffix("\(lacking): run `rbac migrate` first\n"), "\(empty.stderr)")

                let database = configuration.connectionString
                let migrated = try await TestDatabase.settingUp {
                    try await Self.rbac(Self.migrate, database: database)
                }
                #expect(migrated.status == 0, "\(migrated.stderr)")
                let connection = try await PostgresConnection.connect(configuration)
                // A column this release reads and the database lacks is the same story.
                try await connection.execute(
                    "ALTER TABLE webhook_endpoints RENAME COLUMN previous_secret_until TO renamed")
                let columnless = try await run(["webhooks", "list"])
                #expect(
                    columnless.status == 4
                        && columnless.stderr.contains(
                            "lacks part of rbac's schema (column \"previous_secret_until\" does not exist)"),
                    "\(columnless.stderr)")
                try await connection.execute(
                    "ALTER TABLE webhook_endpoints RENAME COLUMN renamed TO previous_secret_until")
                // Migrated, but without the policy its migrations need, as when the run ended before the policy.
                let scripts: String = try await connection.query("SELECT scripts_checksum FROM applied_policy")[0]
                    .decode("scripts_checksum")
                try await connection.execute("UPDATE applied_policy SET scripts_checksum = ''")
                let unsecured = try await run(serve)
                #expect(unsecured.status == 4, "\(unsecured.stderr)")
                #expect(
                    unsecured.stderr.hasSuffix(
                        "lacks the access policy its migrations need (policies/): run `rbac migrate` first\n"),
                    "\(unsecured.stderr)")
                try await connection.execute("UPDATE applied_policy SET scripts_checksum = \(scripts)")
                // The release's last migration not applied yet, as when it is deployed before `rbac migrate` runs.
                let last = try #require(migrations.last)
                let version = try #require(Int(last.prefix(4)))
                try await connection.execute("DELETE FROM schema_migrations WHERE version = \(version)")
                let behind = try await run(serve)
                #expect(behind.status == 4, "\(behind.stderr)")
                #expect(behind.stderr.contains("lacks a migration of this release, from \(last) on"))
                // Migrated by a later release: its own migrations are not this one's to judge. Past the check,
                // serve cannot listen on the port held.
                try await connection.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(version), 'x', 'x'), (9999, 'y', 'y')"
                )
                let later = try await run(serve)
                #expect(later.status == 2 && later.stderr.contains("cannot listen on 127.0.0.1:\(port)"))
                await connection.close()
            }
        }
    }

    @Test("serve starts and answers when whoever read its log goes away while it starts")
    func serveOutlivesItsLogReader() async throws {
        try await Self.withServable { secret, _, configuration in
            // Its log goes to a pipe this test closes after the first line: the lines serve writes while it goes
            // on starting, and one for every request (debug level), meet a closed pipe.
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret, "--log-level", "debug"], database: configuration.connectionString,
                errorLog: "/dev/null", hangingUp: true)
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve wrote nothing")
            let health = URL(string: "http://127.0.0.1:\(port)/health")!
            var answered = 0
            let listened = try await eventually(within: .seconds(10), every: .milliseconds(20)) {
                if let (_, response) = try? await URLSession.shared.data(from: health) {
                    #expect((response as? HTTPURLResponse)?.statusCode == 200)
                    answered += 1
                    return answered == 3
                }
                var status: Int32 = 0
                try #require(waitpid(serve.pid, &status, WNOHANG) == 0, "serve exited, wait status \(status)")
                return false
            }
            try #require(listened, "serve did not answer three times within 10 s")
            await serve.stop()
        }
    }

    @Test("serve's sweeper deletes the outbox messages kept long enough, and logs how many")
    func serveDeletesSettledMessages() async throws {
        try await Self.withServable { secret, _, configuration in
            let admin = try await PostgresConnection.connect(configuration)
            // Sent two hours ago, sent just now, and dead two hours ago.
            _ = try await admin.execute(
                """
                INSERT INTO outbox (event_type, payload, channel, status, delivered_at, next_attempt_at)
                VALUES ('invitation.created', '{}', 'email', 'sent', now() - interval '2 hours', now()),
                       ('invitation.created', '{}', 'email', 'sent', now(), now()),
                       ('invitation.created', '{}', 'email', 'dead', NULL, now() - interval '2 hours')
                """)
            let (serve, _) = try await Self.serve(
                ["--jwt-secret-file", secret, "--keep-sent", "1h", "--keep-dead", "3h"],
                database: configuration.connectionString, errorLog: "/dev/null",
                until: { $0.contains("deleted outbox messages kept long enough") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve deleted nothing: \(serve.lines)")
            let line = serve.lines.first { $0.contains("deleted outbox messages") } ?? ""
            #expect(line.contains("sent=1") && line.contains("dead=0"), "\(line)")
            let left = try await admin.query("SELECT status FROM outbox ORDER BY 1")
            #expect(try left.map { try $0.decode("status", as: String.self) } == ["dead", "sent"])
            await admin.close()
            await serve.stop()
        }
    }

    @Test(
        """
        keys list shows when serve last saw each key: recorded every --sweep-interval, also when another part of the \
        sweep fails, and as serve stops
        """)
    func keysLastUsed() async throws {
        try await Self.withServable { secret, run, configuration in
            func created(_ name: String) async throws -> String {
                try #require(
                    try Self.json(try await run(["keys", "create", "--name", name, "--json"]))["secret"] as? String)
            }
            let (swept, stopped) = (try await created("swept"), try await created("stopped"))
            _ = try await created("idle")
            func lastUsed() async throws -> [String: String] {
                var used: [String: String] = [:]
                for key in try Self.jsonArray(try await run(["keys", "list", "--json"])) {
                    used[try #require(key["name"] as? String)] = key["last_used_at"] as? String
                }
                return used
            }
            func serve(
                sweepingEvery interval: String,
                until ready: @escaping @Sendable (String) -> Bool = { $0.contains("listening on") }
            ) async throws -> (ChildProcess.Running, Int) {
                let (serve, port) = try await Self.serve(
                    ["--jwt-secret-file", secret, "--sweep-interval", interval],
                    database: configuration.connectionString, errorLog: "/dev/null", until: ready)
                try #require(serve.ready, "serve exited before logging what the test waits for: \(serve.lines)")
                return (serve, port)
            }
            func ask(_ port: Int, with key: String) async throws {
                var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/users?limit=1")!)
                request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
                #expect((try await URLSession.shared.data(for: request).1 as? HTTPURLResponse)?.statusCode == 200)
            }
            // Expiries cannot be recorded while serve first runs; the rest of each sweep is done all the same.
            let admin = try await PostgresConnection.connect(configuration)
            _ = try await admin.execute("ALTER FUNCTION sweep_expired(integer) RENAME TO sweep_expired_away")
            let started = Date()
            // Its lines are read up to the later of the two, in whichever order the listener and the first sweep
            // come to log theirs.
            let (listening, warned) = (Flag(), Flag())
            let (first, firstPort) = try await serve(sweepingEvery: "1s") { line in
                if line.contains("listening on") { listening.set() }
                if line.contains("sweeping failed in part") { warned.set() }
                return listening.isSet && warned.isSet
            }
            defer { Task { await first.stop() } }
            try await ask(firstPort, with: swept)
            #expect(
                try await eventually(within: .seconds(10)) { try await lastUsed()["swept"] != nil },
                "recorded by a sweep while serve runs")
            await first.stop()
            _ = try await admin.execute("ALTER FUNCTION sweep_expired_away(integer) RENAME TO sweep_expired")
            await admin.close()
            let warnings = first.lines.filter { $0.contains("sweeping failed in part") }
            #expect(
                !warnings.isEmpty && warnings.allSatisfy { $0.contains("expiries=") && !$0.contains("keys_used=") },
                "\(first.lines)")
            // Sweeps an hour apart: what serve saw after the one it makes as it starts is recorded as it stops.
            let (second, secondPort) = try await serve(sweepingEvery: "3600s")
            defer { Task { await second.stop() } }
            try await ask(secondPort, with: stopped)
            await second.stop()
            let used = try await lastUsed()
            #expect(used.keys.sorted() == ["stopped", "swept"], "the idle key was never used: \(used)")
            for at in used.values {
                let instant = try #require(ISO8601DateFormatter().date(from: String(at.prefix(19)) + "Z"), "\(at)")
                #expect(instant >= started.addingTimeInterval(-1) && instant <= Date(), "\(at)")
            }
            let table = try await run(["keys", "list"]).stdout.split(separator: "\n")
            #expect(table.first?.hasSuffix("LAST USED") == true && table.contains { $0.hasSuffix("  never") })
        }
    }

    @Test("serve makes a couple sent twice with one Idempotency-Key once, over HTTP, answering both alike")
    func idempotencyKeyOverHTTP() async throws {
        try await Self.withServable { secret, run, configuration in
            let key = try #require(
                try Self.json(try await run(["keys", "create", "--name", "app", "--json"]))["secret"] as? String)
            let owner = try #require(
                try Self.json(try await run(["users", "add", "--email", "liv@example.com", "--json"]))["id"] as? String)
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret], database: configuration.connectionString, errorLog: "/dev/null",
                until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/v1/couples")!)
            request.httpMethod = "POST"
            request.httpBody = Data(#"{"name":"Liv & Sam"}"#.utf8)
            for (field, value) in [
                "Authorization": "Bearer \(key)", "X-Acting-User": owner, "Content-Type": "application/json",
                "Idempotency-Key": "couple-1",
            ] {
                request.setValue(value, forHTTPHeaderField: field)
            }
            var answers: [String] = []
            for _ in 0..<2 {
                let (body, response) = try await URLSession.shared.data(for: request)
                #expect((response as? HTTPURLResponse)?.statusCode == 201)
                answers.append(String(decoding: body, as: UTF8.self))
            }
            #expect(answers[0] == answers[1] && answers[0].contains("Liv & Sam"))
            #expect(try Self.jsonArray(try await run(["couples", "list", "--json"])).count == 1)
        }
    }

    @Test("serve's /metrics shows its database pool: connections idle and leased, the most it opens, tasks waiting")
    func servePoolMetrics() async throws {
        try await Self.withServable { secret, _, configuration in
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret], database: configuration.connectionString, errorLog: "/dev/null",
                until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            // /ready asks the database through the pool, and gives the connection back before it answers.
            let (_, ready) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/ready")!)
            #expect((ready as? HTTPURLResponse)?.statusCode == 200)
            let samples = try await Self.metrics(port)
            let idle = try #require(samples[#"rbac_database_connections{state="idle"}"#], "\(samples)")
            let leased = try #require(samples[#"rbac_database_connections{state="leased"}"#])
            #expect(idle >= 1 && idle + leased <= 16, "idle \(idle), leased \(leased)")
            #expect(samples["rbac_database_connections_max"] == 16)
            #expect(samples["rbac_database_waiting_tasks"] == 0)
            await serve.stop()
        }
    }

    /// Two couples of one owner, and `rbac serve` on their database with `--lock-timeout` (and no cache).
    struct LockableCouples: Sendable {
        let couples: [String]
        let owner: String
        let database: PostgresConfiguration
        /// Where serve listens.
        let port: Int
        let key: String
        /// The secret serve verifies end users' tokens with.
        let jwtSecret: String
        /// POSTs `body` to serve's `path` with the header `fields`, many at once if need be.
        let send:
            @Sendable (_ path: String, _ body: String, _ fields: [String: String]) async throws -> (
                status: Int, body: String
            )

        /// POSTs a JSON body as the owner (the service's own key alone to /v1/check).
        func post(_ path: String, _ body: String) async throws -> (status: Int, body: String) {
            var fields = ["Authorization": "Bearer \(key)", "Content-Type": "application/json"]
            if path != "/v1/check" { fields["X-Acting-User"] = owner }
            return try await send(path, body, fields)
        }

        /// Runs `body` while another session holds the first `count` couples' rows locked, as one left open in
        /// psql would.
        func locked(_ count: Int = 1, _ body: () async throws -> Void) async throws {
            let holder = try await PostgresConnection.connect(database)
            try await ensuring {
                try await holder.runScript("BEGIN")
                for couple in couples.prefix(count) {
                    try await holder.query("SELECT id FROM couples WHERE id = \(UUID(uuidString: couple)) FOR UPDATE")
                }
                try await body()
            } finally: {
                try? await holder.runScript("ROLLBACK")
                await holder.close()
            }
        }

        /// Sends `requests` changes to the first `count` couples in turn while their rows are locked (`change`, a
        /// scenario added by default); once `expected` of them wait on the locks (or 30 s went by), runs `body`
        /// with how many do, each holding a database connection. Then lets the locks go and returns every
        /// answer's status.
        func changesWhileLocked(
            _ requests: Int, to count: Int, expected: Int,
            sending change: (@Sendable (_ index: Int, _ couple: String) async throws -> Int)? = nil,
            _ body: (_ waiting: Int) async throws -> Void
        ) async throws -> [Int] {
            let change =
                change ?? { index, couple in
                    try await post("/v1/couples/\(couple)/budget/scenarios", #"{"name":"S\#(index)"}"#).status
                }
            let watcher = try await PostgresConnection.connect(database)
            return try await ensuring {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    try await locked(count) {
                        for index in 0..<requests {
                            let couple = couples[index % count]
                            group.addTask { try await change(index, couple) }
                        }
                        var waiting = 0
                        _ = try await eventually(within: .seconds(30)) {
                            waiting = try await watcher.query(
                                """
                                SELECT count(*)::int AS waiting FROM pg_stat_activity
                                WHERE datname = current_database() AND wait_event_type = 'Lock'
                                """)[0].decode("waiting")
                            return waiting >= expected
                        }
                        try await body(waiting)
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            } finally: {
                await watcher.close()
            }
        }
    }

    static func withLockableCouples(
        lockTimeout: String, _ body: (LockableCouples, ([String]) async throws -> Result) async throws -> Void
    ) async throws {
        try await Self.withServable { secret, run, configuration in
            let key = try #require(
                try Self.json(try await run(["keys", "create", "--name", "app", "--json"]))["secret"] as? String)
            var couples: [String] = []
            for name in ["Liv & Sam", "Ann & Bo"] {
                let created = try Self.json(
                    try await run(["couples", "create", "--name", name, "--owner-email", "liv@example.com", "--json"]))
                couples.append(try #require((created["couple"] as? [String: Any])?["id"] as? String))
            }
            let owner = try #require(
                (try Self.json(try await run(["users", "show", "liv@example.com", "--json"]))["user"]
                    as? [String: Any])?["id"] as? String)
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret, "--lock-timeout", lockTimeout, "--no-cache"],
                database: configuration.connectionString, errorLog: "/dev/null", until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            // Each request on a connection of its own (URLSession takes six at once by default).
            let settings = URLSessionConfiguration.ephemeral
            settings.httpMaximumConnectionsPerHost = 32
            let session = URLSession(configuration: settings)
            let served = LockableCouples(
                couples: couples, owner: owner, database: configuration, port: port, key: key,
                jwtSecret: try String(contentsOfFile: secret, encoding: .utf8)
            ) { path, body, fields in
                var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!, timeoutInterval: 30)
                request.httpMethod = "POST"
                request.httpBody = Data(body.utf8)
                for (field, value) in fields { request.setValue(value, forHTTPHeaderField: field) }
                let (data, response) = try await session.data(for: request)
                return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
            }
            try await body(served, run)
        }
    }

    @Test(
        """
        serve answers a change to a couple whose row, or budget row, stays locked 503 after --lock-timeout, changing \
        nothing
        """)
    func lockHeldTooLong() async throws {
        try await Self.withLockableCouples(lockTimeout: "200ms") { served, run in
            let couple = served.couples[0]
            let path = "/v1/couples/\(couple)/budget/scenarios"
            try await served.locked {
                let refused = try await served.post(path, #"{"name":"Main"}"#)
                #expect(refused.status == 503, "\(refused)")
                #expect(refused.body.contains(#""code":"unavailable""#) && refused.body.contains("lock"), "\(refused)")
            }
            let created = try await served.post(path, #"{"name":"Main"}"#)
            #expect(created.status == 201)
            func scenarios() async throws -> [[String: Any]] {
                try Self.jsonArray(try await run(["budget", "scenarios", "list", "--couple", couple, "--json"]))
            }
            #expect(try await scenarios().count == 1, "the refused request made nothing")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(created.body.utf8)) as? [String: Any])
            let scenario = try #require(body["id"] as? String)
            // A budget row is locked where it is stored: on Citus, on its worker, which gives up as soon. Were it
            // to wait, the server would end the holder's session after 20 s idle, and the change be made.
            let holder = try await PostgresConnection.connect(served.database)
            try await ensuring {
                try await holder.runScript("SET idle_in_transaction_session_timeout = '20s'")
                try await holder.runScript("BEGIN")
                try await holder.query(
                    "SELECT id FROM budget_scenarios WHERE couple_id = \(UUID(uuidString: couple)) FOR UPDATE")
                let refused = try await served.post("\(path)/\(scenario)/primary", "{}")
                #expect(refused.status == 503, "\(refused)")
                #expect(refused.body.contains(#""code":"unavailable""#) && refused.body.contains("lock"), "\(refused)")
            } finally: {
                try? await holder.runScript("ROLLBACK")
                await holder.close()
            }
            #expect(try await scenarios().first?["is_primary"] as? Bool == false, "the refused request changed nothing")
        }
    }

    @Test("serve answers 8 requests of a couple at once, the rest in turn: a locked couple leaves others connections")
    func lockedCoupleWaitsItsTurn() async throws {
        try await Self.withLockableCouples(lockTimeout: "600s") { served, run in
            let (couple, other) = (served.couples[0], served.couples[1])
            let answers = try await served.changesWhileLocked(20, to: 1, expected: 8) { waiting in
                // Eight wait on the lock, each holding a database connection; the other twelve wait their turn
                // without one, as /metrics says.
                #expect(waiting == 8, "\(waiting) wait on the lock")
                var samples: [String: Double] = [:]
                _ = try await eventually(within: .seconds(10)) {
                    samples = try await Self.metrics(served.port)
                    return samples["rbac_requests_waiting_for_turn"] == 12
                }
                #expect(samples["rbac_requests_waiting_for_turn"] == 12, "\(samples)")
                // The other couple's change finds a connection, and the locked couple's checks are answered.
                #expect(
                    try await served.post("/v1/couples/\(other)/budget/scenarios", #"{"name":"Main"}"#).status == 201)
                let check = try await served.post(
                    "/v1/check", #"{"couple_id":"\#(couple)","user_id":"\#(served.owner)","permission":"budget.edit"}"#)
                #expect(check.status == 200 && check.body.contains(#""allowed":true"#), "\(check)")
            }
            // The lock gone, all twenty are answered, eight at a time.
            #expect(answers == Array(repeating: 201, count: 20))
            #expect(try await Self.metrics(served.port)["rbac_requests_waiting_for_turn"] == 0)
            let listed = try Self.jsonArray(
                try await run(["budget", "scenarios", "list", "--couple", couple, "--json"]))
            #expect(listed.count == 20)
        }
    }

    @Test("serve answers 12 requests of all couples at once: two locked couples leave checks a connection")
    func lockedCouplesLeaveChecksConnections() async throws {
        try await Self.withLockableCouples(lockTimeout: "600s") { served, _ in
            // Fewer than the client's 32 connections, with the check's.
            let answers = try await served.changesWhileLocked(24, to: 2, expected: 12) { waiting in
                // Twelve of both couples' requests wait on the locks, each holding a database connection (at most
                // eight of either couple); the other twelve wait their turn without one.
                #expect(waiting == 12, "\(waiting) wait on the locks")
                let check = try await served.post(
                    "/v1/check",
                    #"{"couple_id":"\#(served.couples[1])","user_id":"\#(served.owner)","permission":"budget.edit"}"#)
                #expect(check.status == 200 && check.body.contains(#""allowed":true"#), "\(check)")
            }
            #expect(answers == Array(repeating: 201, count: 24))
        }
    }

    @Test("serve holds accepting invitations to the bound of all changes: accepts to a locked couple leave checks some")
    func lockedCoupleAcceptsInTurn() async throws {
        try await Self.withLockableCouples(lockTimeout: "600s") { served, run in
            let couple = served.couples[0]
            var links: [String] = []
            for _ in 0..<20 {
                let invited = try await run(["invite", "--couple", couple, "--role", "viewer", "--json"])
                links.append(try #require(try Self.json(invited)["link"] as? String))
            }
            let tokens = links.compactMap { URL(string: $0)?.lastPathComponent }
            try #require(tokens.count == 20, "\(links)")
            let answers = try await served.changesWhileLocked(20, to: 1, expected: 12) { index, _ in
                let guest = DevelopmentTokens.sign(
                    [
                        "sub": "guest\(index)", "email": "guest\(index)@example.com",
                        "exp": Int(Date().timeIntervalSince1970) + 600,
                    ], secret: served.jwtSecret)
                return try await served.send(
                    "/invitations/\(tokens[index])/accept", "",
                    ["Authorization": "Bearer \(guest)", "Accept": "application/json"]
                ).status
            } _: { waiting in
                // Twelve wait on the lock, each holding a database connection, as many as all changes may; the
                // other eight wait their turn without one.
                #expect(waiting == 12, "\(waiting) wait on the lock")
                let check = try await served.post(
                    "/v1/check", #"{"couple_id":"\#(couple)","user_id":"\#(served.owner)","permission":"budget.edit"}"#)
                #expect(check.status == 200 && check.body.contains(#""allowed":true"#), "\(check)")
            }
            #expect(answers == Array(repeating: 200, count: 20))
            let members = try Self.jsonArray(try await run(["members", "--couple", couple, "--json"]))
            #expect(members.count == 21)
        }
    }

    /// The samples of serve's /metrics on `port`, by name and labels.
    static func metrics(_ port: Int) async throws -> [String: Double] {
        let (body, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
        var samples: [String: Double] = [:]
        for line in String(decoding: body, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { samples[String(parts[0])] = value }
        }
        return samples
    }

    @Test("serve raises its soft limit on open files to the hard one, takes what it leaves, and refuses more")
    func serveOpenFiles() async throws {
        var limit = rlimit()
        try #require(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let hard = Int(clamping: limit.rlim_max)
        try #require(hard >= 1_000, "the tests' hard limit on open files is \(hard)")
        try await Self.withServable { secret, run, configuration in
            // Started with the 64 open files a soft limit gives, it would take fewer than 64 connections.
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret], database: configuration.connectionString, errorLog: "/dev/null",
                ulimit: "-Sn 64", until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            let held = try (0..<100).map { _ in try LoopbackConnection(port: port) }
            let samples = try await Self.metrics(port)
            #expect(samples["rbac_http_connections_max"] == Double(hard - 256), "\(samples)")
            #expect((samples["rbac_http_connections"] ?? 0) >= 101, "the 100 held, and the one asking")
            withExtendedLifetime(held) {}
            await serve.stop()

            let serving = ["serve", "--port", "1", "--jwt-secret-file", secret]
            for beyond in [hard - 255, Int.max] {
                let refused = try await run(serving + ["--max-connections", "\(beyond)"])
                #expect(refused.status == 2, "\(refused.stderr)")
                #expect(
                    refused.stderr.contains(
                        "--max-connections \(beyond) is more than the \(hard - 256) connections this process's "
                            + "\(hard) open files leave"), "\(refused.stderr)")
            }
            let none = try await run(serving + ["--max-connections", "0"])
            #expect(none.status == 2 && none.stderr.contains("--max-connections must be at least 1"))
            let few = try await ChildProcess.run(
                "/bin/sh", ["-c", "ulimit -n 200 && exec \"$0\" \"$@\" 2>&1", Self.executable.path] + serving,
                environment: ProcessInfo.processInfo.environment.merging(
                    ["DATABASE_URL": configuration.connectionString]) { $1 })
            #expect(few.status == 2, "\(few.output)")
            #expect(few.output.contains("this process may open 200 files"), "\(few.output)")
        }
    }

    @Test("connections held open past the limit wait, and the ones taken go on reaching the database: never a 503")
    func serveHeldConnections() async throws {
        try await Self.withServable { secret, run, configuration in
            let couple = try await Self.createCouple(run)
            let key = try #require(
                try Self.json(try await run(["keys", "create", "--name", "held", "--json"]))["secret"] as? String)
            // 300 files leave 44 connections. Without the limit, the 270 held below would take every file, and
            // the requests that need a database connection of their own would be answered 503.
            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret, "--no-cache"], database: configuration.connectionString,
                errorLog: "/dev/null", ulimit: "-n 300", until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            let request = Array(
                "GET /v1/couples/\(couple)/members HTTP/1.1\r\nHost: rbac.test\r\nAuthorization: Bearer \(key)\r\n\r\n"
                    .utf8)
            let statuses = try await onOwnThread {
                let asking = try (0..<16).map { _ in try LoopbackConnection(port: port) }
                // Taken up to the limit; the rest wait in the listener's queue (of 256).
                let held = try (0..<270).map { _ in try LoopbackConnection(port: port) }
                // All at once, each on a thread of its own, so that the pool needs more than the one connection
                // serve opened as it started.
                let group = DispatchGroup()
                let statuses = Mutex([String](repeating: "", count: asking.count))
                for (index, connection) in asking.enumerated() {
                    group.enter()
                    Thread {
                        let received = (try? connection.send(request)).flatMap { try? connection.receive() } ?? []
                        let line = String(decoding: received, as: UTF8.self).components(separatedBy: "\r\n")[0]
                        statuses.withLock { $0[index] = line }
                        group.leave()
                    }.start()
                }
                group.wait()
                withExtendedLifetime(held) {}
                return statuses.withLock { $0 }
            }
            #expect(statuses.allSatisfy { $0 == "HTTP/1.1 200 OK" }, "\(statuses)")
            await serve.stop()
        }
    }

    @Test("serve --budget-reads-on-workers answers the overview the CLI prints (on Citus, read on the worker)")
    func serveBudgetReadsOnWorkers() async throws {
        try await Self.withServable { secret, run, configuration in
            let created = try await run([
                "couples", "create", "--name", "A & B", "--owner-email", "ann@example.com", "--json",
            ])
            let couple = try #require((try Self.json(created)["couple"] as? [String: Any])?["id"] as? String)
            let owner = try #require((try Self.json(created)["owner"] as? [String: Any])?["id"] as? String)
            @discardableResult
            func budget(_ arguments: [String]) async throws -> [String: Any]? {
                let result = try await run(["budget"] + arguments + ["--couple", couple, "--json"])
                #expect(result.status == 0, "\(result.stderr)")
                return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            }
            let scenario = try #require(try await budget(["scenarios", "add", "Main"])?["id"] as? String)
            var items: [String] = []
            for name in ["Venue", "Food"] {
                let item = try await budget(["items", "add", name, "--scenario", scenario, "--budgeted", "800"])
                items.append(try #require(item?["id"] as? String))
            }
            let expense = try #require(
                try await budget(["expenses", "add", "Deposit", "--amount", "99.99"])?["id"])
            try await budget(
                ["expenses", "allocate", "\(expense)", "--scenario", scenario] + items.flatMap { ["--item", $0] })
            let printed = try #require(try await budget(["overview", "--scenario", scenario]))
            let key = try #require(
                try Self.json(try await run(["keys", "create", "--name", "app", "--json"]))["secret"])

            let (serve, port) = try await Self.serve(
                ["--jwt-secret-file", secret, "--budget-reads-on-workers"],
                database: configuration.connectionString,
                errorLog: "/dev/null", until: { $0.contains("listening on") })
            defer { Task { await serve.stop() } }
            try #require(serve.ready, "serve did not start: \(serve.lines)")
            var request = URLRequest(
                url: URL(
                    string: "http://127.0.0.1:\(port)/v1/couples/\(couple)/budget/scenarios/\(scenario)/overview")!)
            request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
            request.setValue(owner, forHTTPHeaderField: "X-Acting-User")
            let (body, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: body, as: UTF8.self))")
            let answered = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
            for overview in [printed, answered] {
                let totals = try #require(overview["totals"] as? [String: Any])
                #expect((totals["spent"] as? NSNumber)?.decimalValue == Decimal(string: "99.99"), "\(overview)")
                #expect((overview["items"] as? [Any])?.count == 2)
            }
            // On Citus, serve holds a connection to the worker it read from (Citus's own are citus_internal).
            var onWorkers = 0
            for port in TestDatabase.citusWorkers {
                let worker = try await PostgresConnection.connect(
                    configuration.reaching(host: "127.0.0.1", port: port))
                onWorkers += try await worker.query(
                    """
                    SELECT count(*)::int AS n FROM pg_stat_activity
                    WHERE datname = current_database() AND application_name = 'rbac'
                    """)[0].decode("n", as: Int.self)
                await worker.close()
            }
            #expect(TestDatabase.citusWorkers.isEmpty || onWorkers > 0)
            await serve.stop()
        }
    }

    @Test("an unknown role exits 2 with a message naming the valid roles")
    func unknownRole() async throws {
        try await Self.withDatabase { run, _ in
            let couple = try await Self.createCouple(run)
            let grant = try await run([
                "grant", "--couple", couple, "--user", "olivia@example.com", "--role", "overlord",
            ])
            #expect(grant.status == 2)
            #expect(grant.stderr.contains("valid roles: owner, partner, planner, viewer"))
        }
    }

    @Test(
        "malformed ids and emails are refused before any SQL runs",
        arguments: [
            ["grant", "--couple", "not-a-uuid", "--user", "a@example.com", "--role", "viewer"],
            [
                "grant", "--couple", "00000000-0000-0000-0000-000000000000", "--user", "'); drop table users; --",
                "--role", "viewer",
            ],
            ["users", "add", "--email", "not an email"],
            [
                "check", "--couple", "00000000-0000-0000-0000-000000000000", "--user", "a@example.com", "--permission",
                "nope",
            ],
            ["invite", "--couple", "00000000-0000-0000-0000-000000000000", "--role", "viewer", "--expires", "forever"],
            // A place of another listing's kind: a name where a time belongs, a number where a name does.
            [
                "members", "--couple", "00000000-0000-0000-0000-000000000000", "--limit", "2", "--after",
                "00000000-0000-0000-0000-000000000000.WyJ4Il0",
            ],
            [
                "budget", "items", "list", "--couple", "00000000-0000-0000-0000-000000000000", "--limit", "2",
                "--after", "00000000-0000-0000-0000-000000000000.WzFd",
            ],
        ])
    func malformedInput(arguments: [String]) async throws {
        // An unreachable database: reaching it would exit 5, so exit 2 shows nothing was sent.
        let result = try await Self.rbac(arguments, database: "postgres://nobody@127.0.0.1:1/none")
        #expect(result.status == 2, "\(result.stderr)")
        #expect(!result.stderr.isEmpty)
    }

    @Test("an id found malformed once a command runs is refused with the command's usage, before any SQL")
    func malformedIdAtRunTime() async throws {
        /// `rbac budget` with these arguments, for a couple, against a database nothing listens for.
        func budget(_ arguments: [String]) async throws -> Result {
            try await Self.rbac(
                ["budget"] + arguments + ["--couple", "00000000-0000-0000-0000-000000000000"],
                database: "postgres://nobody@127.0.0.1:1/none")
        }
        let result = try await budget(["items", "set-budget", "not-a-uuid", "--budgeted", "5"])
        #expect(result.status == 2)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 3, "\(result.stderr)")
        #expect(lines.first == "rbac: \"not-a-uuid\" is not an item id (a UUID)")
        #expect(lines.dropFirst().first?.hasPrefix("Usage: rbac budget items set-budget <item> ") == true)
        #expect(lines.last == "  See 'rbac budget items set-budget --help' for more information.")
        let payment = try await budget(["payments", "add", "nope", "--amount", "5"])
        #expect(payment.status == 2)
        #expect(
            payment.stderr.hasPrefix("rbac: \"nope\" is not an expense id (a UUID)\nUsage: rbac budget payments add "))
        let json = try await budget(["payments", "add", "nope", "--amount", "5", "--json"])
        #expect(json.status == 2 && json.stderr.split(separator: "\n").count == 1, "with --json, one line")
    }

    @Test("an argument ArgumentParser refuses is echoed with its control characters escaped, as rbac's own line")
    func parsingErrorEscaped() async throws {
        let result = try await Self.rbac(["bo\u{1B}[2J\ngus"], database: "postgres://nobody@127.0.0.1:1/none")
        #expect(result.status == 2)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.first == #"rbac: Unexpected argument 'bo\u{1B}[2J\u{A}gus'"#, "\(result.stderr)")
        #expect(lines.dropFirst().first == "Usage: rbac <subcommand>")
        #expect(!result.stderr.contains("\u{1B}"))
    }

    @Test(
        "a number or duration out of its range is refused with the range and what was given, before any database",
        arguments: [
            (["serve", "--drain-timeout", "0s"], "--drain-timeout must be from 1s to 300s, not 0s"),
            (["serve", "--idle-timeout", "3601s"], "--idle-timeout must be from 1s to 3600s, not 3601s"),
            (["serve", "--lock-timeout", "99ms"], "--lock-timeout must be from 100ms to 600s, not 99ms"),
            (["migrate", "--lock-timeout", "601s"], "--lock-timeout must be from 100ms to 600s, not 601s"),
            (["serve", "--sweep-interval", "999ms"], "--sweep-interval must be from 1s to 3600s, not 999ms"),
            (["serve", "--max-staleness", "11s"], "--max-staleness must be from 20ms to 10s, not 11s"),
            (["serve", "--jwt-leeway", "301s"], "--jwt-leeway must be from 0s to 300s, not 301s"),
            (["serve", "--cache-capacity", "0"], "--cache-capacity must be at least 1, not 0"),
            (["serve", "--max-connections", "-2"], "--max-connections must be at least 1, not -2"),
            (["sweep", "--limit", "100001"], "--limit must be from 1 to 100000, not 100001"),
            (["sweep", "--keep-dead", "0m"], "--keep-dead must be at least 1m, not 0m"),
            (["serve", "--keep-sent", "0d"], "--keep-sent must be at least 1m, not 0d"),
            (
                ["webhooks", "ping", "00000000-0000-0000-0000-000000000000", "--wait", "601s"],
                "--wait must be from 1s to 600s, not 601s"
            ),
        ])
    func outOfRange(arguments: [String], message: String) async throws {
        let result = try await Self.rbac(arguments, database: "postgres://nobody@127.0.0.1:1/none")
        #expect(result.status == 2)
        #expect(result.stderr.hasPrefix("rbac: \(message)\n"), "\(result.stderr)")
    }

    @Test("serve's address and port are refused naming where each came from, option or variable, and what it was")
    func listenAddressRefused() async throws {
        for (arguments, environment, message) in [
            ([], ["RBAC_HOST": ""], #"RBAC_HOST must be an address or host name to listen on, not """#),
            (["--host", "exa mple"], [:], #"--host must be an address or host name to listen on, not "exa mple""#),
            (["--host", "a\nb"], [:], #"--host must be an address or host name to listen on, not "a\u{A}b""#),
            (["--port", "0"], [:], #"--port must be a port number from 1 to 65535, not "0""#),
            (["--port", "65536"], ["RBAC_PORT": "80"], #"--port must be a port number from 1 to 65535, not "65536""#),
            ([], ["RBAC_PORT": " 80"], #"RBAC_PORT must be a port number from 1 to 65535, not " 80""#),
            ([], ["RBAC_PORT": ""], #"RBAC_PORT must be a port number from 1 to 65535, not """#),
            ([], ["RBAC_PORT": "+80"], #"RBAC_PORT must be a port number from 1 to 65535, not "+80""#),
        ] {
            let result = try await Self.rbac(
                ["serve", "--jwt-secret-file", "/dev/null"] + arguments, database: "postgres://nobody@127.0.0.1:1/none",
                environment: environment)
            #expect(result.status == 2)
            #expect(result.stderr == "rbac: \(message)\n", "\(result.stderr)")
        }
    }

    @Test("an unreachable database, or one that refuses the login, exits 5 with one line that says which")
    func databaseUnavailable() async throws {
        let result = try await Self.rbac(["couples", "list"], database: "postgres://nobody@127.0.0.1:1/none")
        #expect(result.status == 5)
        #expect(result.stderr.hasPrefix("rbac: cannot connect to the database at postgres://nobody@127.0.0.1:1/none: "))
        #expect(result.stderr.contains("Connection refused") && result.stderr.split(separator: "\n").count == 1)

        let role = "no_such_role_" + UUID().uuidString.lowercased().prefix(8)
        let refused = try await Self.rbac(
            ["couples", "list"], database: try TestDatabase.server().connectionString + " user=\(role)")
        #expect(refused.status == 5)
        #expect(refused.stderr.hasPrefix("rbac: cannot connect to the database at "), "\(refused.stderr)")
        #expect(refused.stderr.contains("role \"\(role)\" does not exist"), "\(refused.stderr)")
    }

    @Test("policy validate and test pass on the shipped policy; a failing test and an unknown permission are reported")
    func policyCommands() async throws {
        let offline = "postgres://nobody@127.0.0.1:1/none"
        #expect(try await Self.rbac(["policy", "validate"], database: offline).status == 0)
        let valid = try await Self.rbac(["policy", "validate", "--json"], database: offline)
        #expect(valid.stdout.contains(#""roles" : ["#) && valid.stdout.contains(#""valid" : true"#), "\(valid.stdout)")
        let shipped = try await Self.rbac(["policy", "test"], database: offline)
        #expect(shipped.status == 0)
        #expect(shipped.stdout.contains("ok - a planner may not invite an owner"))

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "rbac-policy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let policy = try String(
            contentsOf: repositoryRoot.appendingPathComponent("policies/policy.json"), encoding: .utf8)
        try policy.write(to: directory.appendingPathComponent("policy.json"), atomically: true, encoding: .utf8)
        try
            #"[{"description": "a viewer may edit the budget\u001b[2J", "role": "viewer", "permission": "budget.edit", "allowed": true}]"#
            .write(to: directory.appendingPathComponent("tests.json"), atomically: true, encoding: .utf8)
        let failing = try await Self.rbac(["policy", "test", "--dir", directory.path], database: offline)
        #expect(failing.status == 1)
        // A description's escape is shown, not sent to the terminal.
        #expect(failing.stdout.contains(#"not ok - a viewer may edit the budget\u{1B}[2J"#))
        #expect(!failing.stdout.contains("\u{1B}"))
        // tests.json is read as policy.json is: strict JSON, and what does not fit is named where it stands.
        for (tests, problem) in [
            (
                #"[{"description": "d", "role": "viewer", "permission": "budget.view", "allowed": "yes"}]"#,
                "[0].allowed must be true or false"
            ),
            (#"{"tests": [],}"#, "tests.json is not JSON: a comma before }"),
        ] {
            try tests.write(to: directory.appendingPathComponent("tests.json"), atomically: true, encoding: .utf8)
            let refused = try await Self.rbac(["policy", "test", "--dir", directory.path], database: offline)
            #expect(
                refused.status == 2 && refused.stderr.contains("rbac: invalid policy tests: \(problem)"),
                "\(refused.stderr)")
        }
        let missing = directory.appendingPathComponent("none")
        let unreadable = try await Self.rbac(["policy", "test", "--dir", missing.path], database: offline)
        #expect(
            unreadable.status == 2 && unreadable.stderr == "rbac: cannot read \(missing.path)/policy.json\n",
            "\(unreadable.stderr)")

        try policy.replacingOccurrences(
            of: "\"budget.edit\", \"expenses.edit\"", with: "\"budget.edt\", \"expenses.edit\""
        )
        .write(to: directory.appendingPathComponent("policy.json"), atomically: true, encoding: .utf8)
        let invalid = try await Self.rbac(["policy", "validate", "--dir", directory.path], database: offline)
        #expect(invalid.status == 2)
        #expect(invalid.stderr.contains("unknown permission \"budget.edt\""))

        // A role defined twice, and a trailing comma: refused, saying so, before a database is asked (it would
        // apply the second role, and refuse the comma). A rank the roles table cannot keep, or none, or a
        // description that is no string: named where it stands.
        let rank = #""rank": 4,"#
        for (document, problem) in [
            (
                policy.replacingOccurrences(
                    of: #""roles": {"#,
                    with: #""roles": {"viewer": {"rank": 4, "description": "x", "permissions": []},"#),
                #"policy.json names "viewer" more than once in one object"#
            ),
            (
                policy.replacingOccurrences(of: "\n  }\n}", with: "\n  },\n}"),
                "policy.json is not JSON: a comma before }"
            ),
            (
                policy.replacingOccurrences(of: rank, with: #""rank": 4.5,"#),
                "roles.viewer.rank is malformed: it must be an integer from -2147483648 to 2147483647"
            ),
            (
                policy.replacingOccurrences(of: rank, with: #""rank": 3e9,"#),
                "roles.viewer.rank is malformed: it must be an integer from -2147483648 to 2147483647"
            ),
            (policy.replacingOccurrences(of: rank, with: ""), #"policy.json lacks "roles.viewer.rank""#),
            (
                policy.replacingOccurrences(
                    of: #""description": "Family and friends who follow along: sees, changes nothing""#,
                    with: #""description": 1"#),
                "roles.viewer.description must be a string"
            ),
        ] {
            #expect(document != policy)
            try document.write(to: directory.appendingPathComponent("policy.json"), atomically: true, encoding: .utf8)
            for command in ["validate", "apply"] {
                let refused = try await Self.rbac(["policy", command, "--dir", directory.path], database: offline)
                #expect(refused.status == 2, "\(command): \(refused.stderr)")
                #expect(refused.stderr.contains("rbac: invalid policy: \(problem)"), "\(refused.stderr)")
            }
        }
        // A rank written 4.0 is 4, as the database reads it too.
        try policy.replacingOccurrences(of: rank, with: #""rank": 4.0,"#)
            .write(to: directory.appendingPathComponent("policy.json"), atomically: true, encoding: .utf8)
        let whole = try await Self.rbac(["policy", "validate", "--dir", directory.path], database: offline)
        #expect(whole.status == 0, "\(whole.stderr)")

        // A key nothing reads ("inherit" for "inherits", a misspelt section): refused, naming each, as the
        // database refuses it.
        try policy.replacingOccurrences(of: #""inherits": ["viewer"]"#, with: #""inherit": ["viewer"]"#)
            .replacingOccurrences(of: #""roles": {"#, with: #""role": {}, "roles": {"#)
            .write(to: directory.appendingPathComponent("policy.json"), atomically: true, encoding: .utf8)
        let unread = try await Self.rbac(["policy", "validate", "--dir", directory.path], database: offline)
        #expect(unread.status == 2)
        #expect(
            unread.stderr.contains(
                #"role "planner" names "inherit", which a role does not take; it takes description, grants, "#
                    + "inherits, permissions, rank"), "\(unread.stderr)")
        #expect(
            unread.stderr.contains(#"the policy names "role", which it does not take; it takes permissions, roles"#))
    }
}
