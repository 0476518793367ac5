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

    private func count(_ pool: PostgresConnectionPool, _ table: String) async throws -> Int {
        try await pool.query(PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table)"))[0].decode("n")
    }

    @Test("a fresh database gets every migration in order; running again changes nothing")
    func freshThenNoOp() async throws {
        let runner = MigrationRunner(migrations: try load(twoMigrations))
        try await TestDatabase.withFreshPool { pool in
            let applied = try await runner.migrate(pool)
            #expect(applied.map(\.fileName) == ["0001_first.sql", "0002_second.sql"])
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
            #expect(try await both.migrate(pool).map(\.version) == [2])
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

    @Test("a failing migration is rolled back and not recorded; the ones before it stay applied")
    func failingMigration() async throws {
        var files = twoMigrations
        files["0003_broken.sql"] = "CREATE TABLE third (id int); SELECT 1/0;"
        let runner = MigrationRunner(migrations: try load(files))
        try await TestDatabase.withFreshPool { pool in
            await #expect(throws: PostgresError.self) { try await runner.migrate(pool) }
            #expect(try await count(pool, "schema_migrations") == 2)
            let third = try await pool.query("SELECT to_regclass('third') IS NULL AS missing")
            #expect(try third[0].decode("missing", as: Bool.self))
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
            let barrier = Barrier(count: 2)
            let applied = try await withThrowingTaskGroup(of: [Migration].self) { group in
                for pool in pools {
                    group.addTask {
                        await barrier.arrive()
                        return try await runner.migrate(pool)
                    }
                }
                return try await group.reduce(into: [Migration]()) { $0 += $1 }
            }
            #expect(applied.map(\.version).sorted() == [1, 2])
            #expect(try await count(pools[0], "schema_migrations") == 2)
            #expect(try await count(pools[0], "first") == 1)
            for pool in pools { await pool.close() }
        }
    }

    @Test("budget row counts (sql/0017) start from the rows a database already holds")
    func budgetRowCountsStartFromExistingRows() async throws {
        let all = try Migration.load(from: repositoryRoot.appendingPathComponent("sql"))
        try await TestDatabase.withFreshPool { pool in
            try await MigrationRunner(migrations: all.filter { $0.version < 17 }).migrate(pool)
            let couple: UUID = try await pool.query("INSERT INTO couples (name) VALUES ('Old') RETURNING id")[0]
                .decode("id")
            try await pool.query(
                """
                WITH s AS (INSERT INTO budget_scenarios (couple_id, name) VALUES (\(couple), 'Main') RETURNING id)
                INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
                SELECT \(couple), s.id, 'item ' || n, 1 FROM s, generate_series(1, 3) AS n
                """)
            try await MigrationRunner(migrations: all).migrate(pool)
            let counts = try await pool.query(
                "SELECT table_name, row_count FROM budget_row_counts WHERE couple_id = \(couple) ORDER BY table_name"
            ).map { "\(try $0.decode("table_name") as String)=\(try $0.decode("row_count") as Int32)" }
            #expect(counts == ["budget_items=3", "budget_scenarios=1"])
        }
    }

    @Test("the project's own sql/ migrations apply to an empty database and re-run as a no-op")
    func projectMigrations() async throws {
        let runner = MigrationRunner(migrations: try Migration.load(from: repositoryRoot.appendingPathComponent("sql")))
        try await TestDatabase.withFreshPool { pool in
            let first = try await runner.migrate(pool)
            let second = try await runner.migrate(pool)
            #expect(first.count == runner.migrations.count)
            #expect(second.isEmpty)
        }
    }

    @Test("migrating with the policy unchanged applies nothing and waits for no lock on couples or memberships")
    func unchangedPolicyIsNoOp() async throws {
        let runner = MigrationRunner(migrations: try Migration.load(from: repositoryRoot.appendingPathComponent("sql")))
        let policy = try AccessPolicy.load(from: repositoryRoot.appendingPathComponent("policies"))
        try await TestDatabase.withFreshPool { pool in
            try await runner.migrate(pool)
            #expect(try await policy.apply(pool, force: false), "a new database gets the policy")
            let appliedAt: () async throws -> String = {
                try await pool.query("SELECT applied_at::text AS t FROM applied_policy")[0].decode("t", as: String.self)
            }
            let first = try await appliedAt()

            // A session holding every lock on the hot tables, as a long write or a lock queue would.
            let holder = try await PostgresConnection.connect(pool.configuration)
            try await holder.execute("BEGIN")
            try await holder.execute("LOCK TABLE couples, memberships IN ACCESS EXCLUSIVE MODE")
            let applied = try await withThrowingTaskGroup(of: Bool?.self) { tasks in
                tasks.addTask { try await policy.apply(pool, force: false) }
                tasks.addTask {
                    try? await Task.sleep(for: .seconds(20))
                    return nil  // the apply still waits: it wanted a lock
                }
                let first = try await tasks.next() ?? nil
                tasks.cancelAll()
                try await holder.execute("ROLLBACK")
                while try await tasks.next() != nil {}
                return first
            }
            await holder.close()
            #expect(applied == false, "the unchanged policy was skipped without waiting for the locks")
            #expect(try await appliedAt() == first)

            let reworded = try AccessPolicy(scripts: policy.scripts, policyJSON: policy.policyJSON + "\n")
            #expect(try await reworded.apply(pool, force: false), "a changed policy is applied")
            #expect(try await policy.apply(pool), "rbac policy apply applies it whatever the checksum")
            #expect(try await appliedAt() != first)
        }
    }
}
