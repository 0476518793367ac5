import Foundation
import Postgres
import Storage
import TestSupport
import Testing

@Suite("Migrations")
struct MigrationTests {
    /// Writes `files` to a directory of their own, loads them as migrations, and removes the directory.
    private func load(_ files: [String: String]) throws -> [Migration] {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: url) }
        for (name, sql) in files {
            try Data(sql.utf8).write(to: url.appendingPathComponent(name))
        }
        return try Migration.load(from: url)
    }

    private let twoMigrations = [
        "0001_first.sql": "CREATE TABLE first (id int PRIMARY KEY); INSERT INTO first VALUES (1);",
        "0002_second.sql": "CREATE TABLE second (id int PRIMARY KEY);",
    ]

    /// The rows of `table`: none when there is no such table (a run that applied nothing makes none).
    private func count(_ pool: PostgresConnectionPool, _ table: String) async throws -> Int {
        let present: Bool = try await pool.query("SELECT to_regclass(\(table)) IS NOT NULL AS present")[0]
            .decode("present")
        guard present else { return 0 }
        return try await pool.query(PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table)"))[0].decode("n")
    }

    @Test("a fresh database gets every migration in order; running again changes nothing")
    func freshThenNoOp() async throws {
        let runner = MigrationRunner(migrations: try load(twoMigrations))
        try await TestDatabase.withFreshPool { pool in
            let applied = try await runner.migrate(pool)
            #expect(applied.fileNames == ["0001_first.sql", "0002_second.sql"])
            #expect(try await count(pool, "schema_migrations") == 2)
            #expect(try await count(pool, "first") == 1)

            let again = try await runner.migrate(pool)
            #expect(again.isEmpty)
            #expect(try await count(pool, "first") == 1)
            #expect(try await runner.status(pool).map(\.state) == [.applied, .applied])
        }
    }

    @Test("a new migration file is applied on the next run, and status lists it as pending before")
    func incremental() async throws {
        let first = MigrationRunner(
            migrations: try load(["0001_first.sql": twoMigrations["0001_first.sql"]!]))
        let both = MigrationRunner(migrations: try load(twoMigrations))
        try await TestDatabase.withFreshPool { pool in
            try await first.migrate(pool)
            #expect(try await both.status(pool).map(\.state) == [.applied, .pending])
            #expect(try await both.migrate(pool).migrations.map(\.version) == [2])
        }
    }

    @Test("an applied migration whose file changed is refused, naming the file, and nothing runs")
    func editedFileRefused() async throws {
        let original = MigrationRunner(migrations: try load(twoMigrations))
        var edited = twoMigrations
        edited["0001_first.sql"] = "CREATE TABLE first (id bigint PRIMARY KEY);"
        edited["0003_third.sql"] = "CREATE TABLE third (id int);"
        let changed = MigrationRunner(migrations: try load(edited))
        try await TestDatabase.withFreshPool { pool in
            try await original.migrate(pool)
            let error = await #expect(throws: MigrationError.self) { try await changed.migrate(pool) }
            #expect(error.map { "\($0)" }?.contains("0001_first.sql") == true)
            let third = try await pool.query("SELECT to_regclass('third') IS NULL AS missing")
            #expect(try third[0].decode("missing", as: Bool.self))
        }
    }

    @Test("a failing migration rolls the whole run back: nothing before it is applied or recorded")
    func failingMigration() async throws {
        var files = twoMigrations
        files["0003_broken.sql"] = "CREATE TABLE third (id int); SELECT 1/0;"
        let runner = MigrationRunner(migrations: try load(files))
        try await TestDatabase.withFreshPool { pool in
            await #expect(throws: PostgresError.self) { try await runner.migrate(pool) }
            #expect(try await count(pool, "schema_migrations") == 0)
            let missing = try await pool.query(
                "SELECT to_regclass('first') IS NULL AND to_regclass('third') IS NULL AS missing")
            #expect(try missing[0].decode("missing", as: Bool.self))
        }
    }

    @Test("badly named files and duplicate numbers are refused before anything runs")
    func badFiles() throws {
        #expect(throws: MigrationError.badFileName("1_first.sql")) { try load(["1_first.sql": "SELECT 1"]) }
        #expect(throws: MigrationError.duplicateVersion("0001_a.sql", "0001_b.sql")) {
            try load(["0001_a.sql": "SELECT 1", "0001_b.sql": "SELECT 2"])
        }
    }

    @Test("two migrate runs at once apply each migration exactly once", arguments: 0..<10)
    func concurrentRuns(round: Int) async throws {
        let runner = MigrationRunner(migrations: try load(twoMigrations))
        try await TestDatabase.withFresh { configuration in
            // Two pools: two separate sessions, like two `rbac migrate` processes.
            let pools = (0..<2).map { _ in PostgresConnectionPool(configuration: configuration, maxConnections: 1) }
            let applied = try await race(2) { index, go in
                await go()
                return try await runner.migrate(pools[index]).migrations
            }.joined()
            #expect(applied.map(\.version).sorted() == [1, 2])
            #expect(try await count(pools[0], "schema_migrations") == 2)
            #expect(try await count(pools[0], "first") == 1)
            for pool in pools { await pool.close() }
        }
    }

    @Test("the project's own sql/ migrations apply to an empty database and re-run as a no-op")
    func projectMigrations() async throws {
        let runner = try MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql"))
        try await TestDatabase.withFreshPool { pool in
            let first = try await TestDatabase.settingUp { try await runner.migrate(pool) }
            let second = try await runner.migrate(pool)
            #expect(first.migrations.count == runner.migrations.count)
            #expect(first.definitions.count == runner.definitions.count)
            #expect(second.isEmpty)
        }
    }

    /// The project's migrations, and those before `version` with today's definitions: a database as an earlier
    /// release left it, to migrate from.
    private func projectMigrations(before version: Int) throws -> (all: MigrationRunner, before: MigrationRunner) {
        let all = try MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql"))
        let before = MigrationRunner(
            migrations: all.migrations.filter { $0.version < version }, definitions: all.definitions,
            distribution: all.distribution)
        return (all, before)
    }

    @Test("addresses stored decomposed before sql/0011 come out of it composed, and later writes stay composed")
    func composedAddresses() async throws {
        let (all, before) = try projectMigrations(before: 11)
        let composed = "zo\u{EB}@example.com"
        try await TestDatabase.withFreshPool { pool in
            try await TestDatabase.settingUp { try await before.migrate(pool) }
            _ = try await pool.query("INSERT INTO users (email) VALUES (\("zoe\u{308}@example.com"))")
            #expect(
                try await all.migrate(pool).migrations.map(\.version)
                    == all.migrations.map(\.version).filter { $0 >= 11 })
            let stored: String = try await pool.query("SELECT email FROM users")[0].decode("email")
            #expect(Array(stored.utf8) == Array(composed.utf8))
            let refused = await #expect(throws: PostgresError.self) {
                _ = try await pool.query("INSERT INTO users (email) VALUES (\("zoe\u{308}@example.org"))")
            }
            #expect(refused?.constraint == "users_email_composed")
        }
    }

    /// What sql/0012, sql/0013 and sql/0015 must not change: an address stored with a bidirectional override, one
    /// with its domain in IDNA's ASCII spelling, and one with a domain IDNA maps to another.
    static let addressesMigrationsStopOn = [
        (
            version: 12, stored: "ann\u{202E}moc.elpmaxe@example.com", refused: "a\u{2066}b@example.com",
            message: "1 row(s) of users hold an email address with a bidirectional override",
            constraint: "users_email_check"
        ),
        (
            version: 13, stored: "ann@mail.xn--bcher-kva.example", refused: "bob@XN--BCHER-KVA.example",
            message: "1 row(s) of users hold an email address with a domain in IDNA's ASCII spelling (xn--)",
            constraint: "users_email_domain_letters"
        ),
        (
            version: 15, stored: "ann@\u{FF42}\u{FC}cher.example", refused: "bob@b\u{FC}\u{AD}cher.example",
            message: "1 row(s) of users hold an email address with a domain that IDNA maps to another",
            constraint: "users_email_domain_mapped"
        ),
    ]

    @Test(
        "an address a migration must not change stops it, naming where; once it is gone, such are refused",
        arguments: addressesMigrationsStopOn)
    func addressesStopMigration(
        version: Int, stored: String, refused: String, message: String, constraint: String
    ) async throws {
        let (all, before) = try projectMigrations(before: version)
        try await TestDatabase.withFreshPool { pool in
            try await TestDatabase.settingUp { try await before.migrate(pool) }
            _ = try await pool.query("INSERT INTO users (email) VALUES (\(stored))")
            let stopped = await #expect(throws: PostgresError.self) { try await all.migrate(pool) }
            #expect(stopped?.message == message)
            #expect(stopped?.hint?.hasPrefix("find them with SELECT ") == true)
            #expect(try await count(pool, "schema_migrations") == before.migrations.count)

            _ = try await pool.query("DELETE FROM users")
            #expect(
                try await all.migrate(pool).migrations.map(\.version)
                    == all.migrations.map(\.version).filter { $0 >= version })
            // Every email column's checks against EmailAddress: EmailAddressRuleTests.
            let refusal = await #expect(throws: PostgresError.self) {
                _ = try await pool.query("INSERT INTO users (email) VALUES (\(refused))")
            }
            #expect(refusal?.constraint == constraint)
        }
    }

    @Test(
        "a database not encoded in UTF8, or whose locale lowers ASCII alone, is refused, naming why; nothing applied",
        arguments: [
            ("SQL_ASCII", "rbac needs a database encoded in UTF8; this one is SQL_ASCII"),
            (
                "UTF8",
                "rbac needs a database whose locale knows the case of letters beyond ASCII; this one's LC_CTYPE is C"
            ),
        ])
    func unfitDatabase(encoding: String, message: String) async throws {
        let runner = try MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql"))
        let name = "test_unfit_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try await PostgresConnection.connect(try TestDatabase.server())
        try await ensuring {
            try await admin.execute(
                """
                CREATE DATABASE \(identifier: name) ENCODING \(literal: encoding) LC_COLLATE 'C' LC_CTYPE 'C'
                TEMPLATE template0
                """)
            let pool = PostgresConnectionPool(configuration: try TestDatabase.server(database: name), maxConnections: 1)
            let (error, applied) = try await ensuring {
                let error = await #expect(throws: PostgresError.self) { try await runner.migrate(pool) }
                return (error, try await count(pool, "schema_migrations"))
            } finally: {
                await pool.close()
            }
            #expect(error?.message == message)
            #expect(applied == 0)
        } finally: {
            try await admin.execute("DROP DATABASE IF EXISTS \(identifier: name)")
            await admin.close()
        }
    }

    @Test("a public schema every role may create in, as before PostgreSQL 15: migrate closes it to end users")
    func publicSchemaClosed() async throws {
        let runner = try MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql"))
        try await TestDatabase.withFreshPool(maxConnections: 1) { pool in
            try await pool.withConnection { try await $0.runScript("GRANT CREATE ON SCHEMA public TO PUBLIC") }
            _ = try await TestDatabase.settingUp { try await runner.migrate(pool) }
            // An end user's function that PostgreSQL would pick over pg_catalog's polymorphic to_jsonb for a
            // couple's row, in the audit trigger that runs as the functions' owner.
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withTransaction { connection in
                    try await connection.runScript(
                        """
                        SET LOCAL ROLE rbac_app;
                        CREATE FUNCTION public.to_jsonb(couples) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb'
                        """)
                }
            }
            #expect(error?.sqlState == .insufficientPrivilege)
        }
    }

    @Test(
        "end users left able to create in public, or what they made there while they could: refused, named; nothing applied",
        arguments: [
            // Only the grantor takes back its grant; migrate revokes as the schema's owner. Made on the
            // coordinator alone on Citus, which sends no DDL to the workers for a role that is no superuser (on
            // plain PostgreSQL the setting is a placeholder).
            (
                [
                    "GRANT CREATE ON SCHEMA public TO %@ WITH GRANT OPTION",
                    "SET citus.enable_ddl_propagation = off; SET ROLE %@; GRANT CREATE ON SCHEMA public TO PUBLIC; "
                        + "RESET ROLE; RESET citus.enable_ddl_propagation",
                ], "end users may create objects in schema public or rbac as ", "rbac_app"
            ),
            // A role end users log in as, as Supabase's authenticated, with a grant of its own.
            (
                ["GRANT rbac_app TO %@", "GRANT CREATE ON SCHEMA public TO %@"],
                "end users may create objects in schema public or rbac as ", "%@"
            ),
            // Such a role's function, made while PUBLIC could create in public, for the audit trigger to call.
            (
                [
                    "GRANT rbac_app TO %@", "GRANT CREATE ON SCHEMA public TO PUBLIC",
                    "SET citus.enable_ddl_propagation = off; SET ROLE %@; CREATE FUNCTION public.to_jsonb(couples) "
                        + "RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb'; RESET ROLE; "
                        + "RESET citus.enable_ddl_propagation",
                ], "end users made objects in schema public or rbac",
                "function public.to_jsonb(public.couples) (owned by %@)"
            ),
        ])
    func publicSchemaLeftOpenRefused(setUp: [String], refusal: String, naming: String) async throws {
        let runner = try MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql"))
        let role = "test_role_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // Each in a transaction of its own: on Citus, where a worker learns of a role or a grant when it commits,
        // a grant made as the role waits there for the one made to it. The role's name is letters, digits and
        // underscores: an identifier as it stands.
        let statements =
            ["CREATE ROLE \(role) LOGIN"] + setUp.map { $0.replacingOccurrences(of: "%@", with: role) }
            // An installation upgrading to this release: its privileges file is an older one.
            + ["UPDATE schema_definitions SET checksum = 'older' WHERE file_name = 'functions/privileges.sql'"]
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 1) { pool in
            // Alone on Citus, where grants and roles made at once on every node deadlock.
            let error = try await TestDatabase.settingUp {
                for statement in statements {
                    try await pool.withConnection { try await $0.runScript(PostgresQuery(unsafeSQL: statement)) }
                }
                return try await ensuring {
                    await #expect(throws: PostgresError.self) { try await runner.migrate(pool) }
                } finally: {
                    try await pool.withConnection {
                        try await $0.runScript("DROP OWNED BY \(identifier: role); DROP ROLE \(identifier: role)")
                    }
                }
            }
            #expect(error?.sqlState == .insufficientPrivilege)
            let message = try #require(error?.message)
            #expect(message.hasPrefix(refusal))
            #expect(message.contains(naming.replacingOccurrences(of: "%@", with: role)), "\(message)")
            let recorded = try await pool.query(
                "SELECT checksum FROM schema_definitions WHERE file_name = 'functions/privileges.sql'")
            #expect(try recorded[0].decode("checksum", as: String.self) == "older")
        }
    }

    /// `body`'s result, or nil when it is still waiting after 20 seconds (for a lock, in these tests).
    private func withinTwentySeconds<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        try await withThrowingTaskGroup(of: T?.self) { tasks in
            tasks.addTask { try await body() }
            tasks.addTask {
                try? await Task.sleep(for: .seconds(20))
                return nil
            }
            let first = try await tasks.next() ?? nil
            tasks.cancelAll()
            return first
        }
    }

    @Test("a policy.json that names a key twice is refused before it reaches the database")
    func policyRepeatingAKey() throws {
        let shipped = try AccessPolicy.load(from: repositoryRoot.appendingPathComponent("policies")).policyJSON
        let twice = shipped.replacingOccurrences(of: #""roles": {"#, with: #""roles": {"owner": {},"#)
        #expect(twice != shipped)
        #expect(throws: AccessPolicyError.notStrictJSON("policy.json", .repeatedKey("owner"))) {
            try AccessPolicy(scripts: [], policyJSON: twice)
        }
    }

    @Test("a no-op migrate and a change to what roles grant wait for no lock on couples or memberships")
    func policyWithoutHotLocks() async throws {
        let runner = try MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql"))
        let policy = try AccessPolicy.load(from: repositoryRoot.appendingPathComponent("policies"))
        try await TestDatabase.withFreshPool { pool in
            try await TestDatabase.settingUp { try await runner.migrate(pool) }
            #expect(try await policy.apply(pool, force: false), "a new database gets the policy")
            let couple: UUID = try await pool.query("INSERT INTO couples (name) VALUES ('C') RETURNING id")[0]
                .decode("id")
            let appliedAt: () async throws -> String = {
                try await pool.query("SELECT applied_at::text AS t FROM applied_policy")[0].decode("t", as: String.self)
            }
            let first = try await appliedAt()

            // A session holding every lock on the hot tables, as a long write or a lock queue would.
            let holder = try await PostgresConnection.connect(pool.configuration)
            try await holder.execute("BEGIN")
            try await holder.execute("LOCK TABLE couples, memberships IN ACCESS EXCLUSIVE MODE")
            let migrated = try await withinTwentySeconds { try await runner.migrate(pool) }
            #expect(migrated?.isEmpty == true, "a no-op migrate ran nothing and waited for nothing")
            let unchanged = try await withinTwentySeconds { try await policy.apply(pool, force: false) }
            #expect(unchanged == false, "the unchanged policy was skipped without waiting for the locks")
            #expect(try await appliedAt() == first)

            let changed = try policy.granting("budget.edit", to: "viewer")
            let applied = try await withinTwentySeconds { try await changed.apply(pool, force: false) }
            #expect(applied == true, "a change to what roles grant was applied without waiting for the locks")
            try await holder.execute("ROLLBACK")
            await holder.close()
            let revision: Int64 = try await pool.query("SELECT revision FROM couples WHERE id = \(couple)")[0]
                .decode("revision")
            #expect(revision == 0, "no couple's row was written")
            #expect(try await policy.apply(pool), "rbac policy apply applies it whatever the checksum")
            #expect(try await appliedAt() != first)
        }
    }

    @Test("every function, trigger and policy is defined in exactly one file, none in a migration")
    func oneHomePerDefinition() throws {
        let sql = repositoryRoot.appendingPathComponent("sql")
        var files: [(name: String, text: String)] = []
        for (directory, prefix) in [
            (sql, "sql/"), (sql.appendingPathComponent("functions"), "sql/functions/"),
            (repositoryRoot.appendingPathComponent("policies"), "policies/"),
        ] {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".sql")
            {
                files.append(
                    (prefix + name, try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)))
            }
        }
        let definition =
            /(?i)CREATE\s+(?:OR\s+REPLACE\s+|CONSTRAINT\s+)?(FUNCTION|TRIGGER|VIEW|POLICY)\s+([a-z_][a-z0-9_.]*)(?:[^;]*?\sON\s+([a-z_][a-z0-9_.]*))?/
        var homes: [String: Set<String>] = [:]
        for file in files {
            for match in file.text.matches(of: definition) {
                let kind = match.1.uppercased()
                // Triggers and policies are named per table; functions and views per schema.
                let table = kind == "TRIGGER" || kind == "POLICY" ? " ON \(match.3 ?? "?")" : ""
                homes["\(kind) \(match.2)\(table)", default: []].insert(file.name)
            }
        }
        #expect(homes.count > 60, "the scan finds the definitions")
        for (object, files) in homes.sorted(by: { $0.key < $1.key }) {
            #expect(files.count == 1, "\(object) is defined in \(files.sorted())")
            #expect(
                !files.contains { $0.wholeMatch(of: /sql\/\d{4}_.*/) != nil },
                "\(object) belongs in sql/functions/, not in a migration")
        }
    }

    @Test("a changed definition file is applied by the next migrate, alone; every function comes from a file")
    func changedDefinitionReapplied() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-sql-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("sql"), to: root)
        defer { try? FileManager.default.removeItem(at: root) }
        try await TestDatabase.withFreshPool { pool in
            let runner = try MigrationRunner.load(from: root)
            let first = try await TestDatabase.settingUp { try await runner.migrate(pool) }
            #expect(!first.migrations.isEmpty && first.definitions.count == runner.definitions.count)

            let defined = try await pool.query(
                """
                SELECT count(*) AS n FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname IN ('public', 'rbac')
                """)[0].decode("n", as: Int64.self)
            let texts = try FileManager.default.contentsOfDirectory(
                atPath: root.appendingPathComponent("functions").path
            )
            .map { try String(contentsOf: root.appendingPathComponent("functions/\($0)"), encoding: .utf8) }
            let written = texts.map { $0.components(separatedBy: "CREATE OR REPLACE FUNCTION ").count - 1 }.reduce(0, +)
            #expect(defined == Int64(written), "the database holds exactly the functions the files define")

            let access = root.appendingPathComponent("functions/access.sql")
            try
                (try String(contentsOf: access, encoding: .utf8)
                    + """

                    COMMENT ON FUNCTION rbac.jwt_user_id() IS 'edited';
                    CREATE OR REPLACE FUNCTION rbac.added() RETURNS int LANGUAGE sql AS 'SELECT 1';

                    """).write(to: access, atomically: true, encoding: .utf8)
            let second = try await MigrationRunner.load(from: root).migrate(pool)
            #expect(second.migrations.isEmpty)
            // The privileges file runs after any other: the new function is nobody's but the operator's.
            #expect(second.definitions.map(\.fileName) == ["functions/access.sql", "functions/privileges.sql"])
            let comment = try await pool.query("SELECT obj_description('rbac.jwt_user_id()'::regprocedure) AS c")[0]
            #expect(try comment.decode("c", as: String?.self) == "edited")
            let open = try await pool.query(
                "SELECT has_function_privilege('rbac_app', 'rbac.added()', 'EXECUTE') AS open")[0]
            #expect(try open.decode("open", as: Bool.self) == false)
            #expect(try await MigrationRunner.load(from: root).migrate(pool).isEmpty)
            #expect(try await MigrationRunner.load(from: root).status(pool).allSatisfy { $0.state == .applied })
        }
    }

    @Test("a release's new budget table: plain migrate distributes it where the budget is distributed, only there")
    func newBudgetTableDistributed() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-sql-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("sql"), to: root)
        defer { try? FileManager.default.removeItem(at: root) }
        let citus = !TestDatabase.citusWorkers.isEmpty
        try await TestDatabase.withFreshPool { pool in
            // Each run on connections of its own, as each `rbac migrate` has: the settings distributing sets for
            // the database reach only sessions begun after it.
            func migrate(distribute: Bool) async throws -> MigrationRunner.Applied {
                let own = PostgresConnectionPool(configuration: pool.configuration, maxConnections: 1)
                return try await ensuring {
                    try await TestDatabase.settingUp {
                        try await MigrationRunner.load(from: root).migrate(own, distribute: distribute)
                    }
                } finally: {
                    await own.close()
                }
            }
            _ = try await migrate(distribute: citus)

            // The next release adds a table of notes on scenarios to the budget.
            try Data(
                """
                CREATE TABLE budget_notes (
                    couple_id uuid NOT NULL REFERENCES couples (id) ON DELETE CASCADE,
                    id uuid NOT NULL DEFAULT gen_random_uuid(),
                    scenario_id uuid NOT NULL,
                    note text NOT NULL,
                    PRIMARY KEY (couple_id, id),
                    FOREIGN KEY (couple_id, scenario_id) REFERENCES budget_scenarios (couple_id, id) ON DELETE CASCADE
                );
                GRANT SELECT ON budget_notes TO rbac_app;
                """.utf8
            ).write(to: root.appendingPathComponent("0999_budget_notes.sql"))
            let budget = root.appendingPathComponent("functions/budget.sql")
            let listed = "('gifts_and_owed', 'gift', 'gifts.view')"
            let definitions = try String(contentsOf: budget, encoding: .utf8)
            #expect(definitions.contains(listed))
            try definitions.replacingOccurrences(
                of: listed, with: listed + ",\n           ('budget_notes', 'budget_note', 'budget.view')"
            ).write(to: budget, atomically: true, encoding: .utf8)

            let upgraded = try await migrate(distribute: false)
            #expect(upgraded.migrations.map(\.fileName) == ["0999_budget_notes.sql"])
            #expect(upgraded.distributed == citus, "distributed again only where it was before")
            let placed = try await pool.query(
                """
                SELECT rbac.distributed('budget_notes') AS distributed,
                       has_table_privilege('rbac_app', 'budget_notes', 'SELECT') AS readable
                """)[0]
            #expect(try placed.decode("distributed", as: Bool.self) == citus)
            #expect(try placed.decode("readable", as: Bool.self) == !citus, "refused to rbac_app beside the budget")

            // Its rows advance the couple's budget revision, as the other budget tables' do, and go with their
            // scenario (on Citus, on the shards colocated with the note's).
            let couple: UUID = try await pool.query("INSERT INTO couples (name) VALUES ('Notes') RETURNING id")[0]
                .decode("id")
            let scenario: UUID = try await pool.query(
                "INSERT INTO budget_scenarios (couple_id, name) VALUES (\(couple), 'Main') RETURNING id")[0].decode(
                    "id")
            _ = try await pool.query(
                "INSERT INTO budget_notes (couple_id, scenario_id, note) VALUES (\(couple), \(scenario), 'florist')")
            let revision = try await pool.query("SELECT revision FROM budget_revisions WHERE couple_id = \(couple)")
            #expect(try revision.map { try $0.decode("revision", as: Int64.self) } == [2], "the scenario's, the note's")
            _ = try await pool.query("DELETE FROM budget_scenarios WHERE couple_id = \(couple) AND id = \(scenario)")
            let notes = try await pool.query("SELECT count(*) AS n FROM budget_notes WHERE couple_id = \(couple)")
            #expect(try notes[0].decode("n", as: Int64.self) == 0)
        }
    }
}
