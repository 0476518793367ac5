import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Statements, errors, transactions, cancellation and notifications", .timeLimit(.minutes(2)))
struct ConnectionTests {
    @Test("SQL metacharacters in bound values are stored and read back verbatim")
    func metacharactersStayData() async throws {
        try await TestDatabase.withFreshPool { pool in
            try await pool.query("CREATE TABLE users (id serial PRIMARY KEY, name text NOT NULL)")
            let hostile = "'); drop table users; --"
            try await pool.query("INSERT INTO users (name) VALUES (\(hostile))")
            let rows = try await pool.query("SELECT name FROM users WHERE name = \(hostile)")
            #expect(rows.count == 1)
            #expect(try rows[0].decode("name", as: String.self) == hostile)
            let tables = try await pool.query("SELECT count(*) AS n FROM pg_tables WHERE tablename = 'users'")
            #expect(try tables[0].decode("n", as: Int.self) == 1)
        }
    }

    @Test("a unique violation carries SQLSTATE 23505 and the constraint, and its description shows no values")
    func uniqueViolation() async throws {
        try await TestDatabase.withFreshPool { pool in
            try await pool.query("CREATE TABLE users (email text CONSTRAINT users_email_key UNIQUE)")
            let email = "secret-address@example.com"
            try await pool.query("INSERT INTO users VALUES (\(email))")
            let error = await #expect(throws: PostgresError.self) {
                try await pool.query("INSERT INTO users VALUES (\(email))")
            }
            #expect(error?.kind == .server)
            #expect(error?.sqlState == .uniqueViolation)
            #expect(error?.constraint == "users_email_key")
            #expect(error?.table == "users")
            #expect(error?.detail?.contains(email) == true)
            #expect(error.map { "\($0)" }?.contains(email) == false)
            #expect(error.map { "\($0)" }?.contains("users_email_key") == true)
        }
    }

    @Test("a bad value's error keeps the value out of the description")
    func invalidInputIsNotShown() async throws {
        try await TestDatabase.withFreshPool { pool in
            let input = "not-a-uuid-but-a-secret"
            let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT \(input)::uuid") }
            #expect(error?.sqlState == .invalidTextRepresentation)
            #expect(error?.message.contains(input) == true)
            #expect(error.map { "\($0)" }?.contains(input) == false)
        }
    }

    @Test("a failing transaction rolls back everything it did")
    func rollback() async throws {
        struct Boom: Error {}
        try await TestDatabase.withFreshPool { pool in
            try await pool.query("CREATE TABLE items (n int)")
            await #expect(throws: Boom.self) {
                try await pool.withTransaction { connection in
                    try await connection.query("INSERT INTO items VALUES (1)")
                    throw Boom()
                }
            }
            let rows = try await pool.query("SELECT count(*) AS n FROM items")
            #expect(try rows[0].decode("n", as: Int.self) == 0)
            // The pool is still usable afterwards.
            try await pool.withTransaction { _ = try await $0.query("INSERT INTO items VALUES (2)") }
            #expect(try await pool.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self) == 1)
        }
    }

    @Test("a transaction's opening runs in the round trip that begins it; when it fails, nothing stays open")
    func opening() async throws {
        try await TestDatabase.withFreshPool(maxConnections: 1) { pool in
            try await pool.query("CREATE TABLE items (n int)")
            let before = pool.statementsSent
            let setting = try await pool.withTransaction(opening: ["SET LOCAL application_name = 'opened'"]) {
                try await $0.query("INSERT INTO items VALUES (1)")
                return try await $0.query("SELECT current_setting('application_name') AS name")[0].decode(
                    "name", as: String.self)
            }
            #expect(setting == "opened")
            #expect(pool.statementsSent - before == 4, "BEGIN with the opening, two statements, COMMIT")
            // The setting ended with the transaction; the insert was committed.
            #expect(
                try await pool.query("SELECT current_setting('application_name') AS name")[0].decode(
                    "name", as: String.self) != "opened")
            #expect(try await pool.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self) == 1)

            let backend: Int32 = try await pool.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
            let ran = Counter()
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withTransaction(opening: ["INSERT INTO items VALUES (2)", "SELECT 1 / 0"]) { _ in
                    _ = await ran.increment()
                }
            }
            #expect(error?.sqlState == SQLState("22012"))
            #expect(await ran.value == 0, "the body does not run after its opening failed")
            // The opening's own insert went with it, and the connection, rolled back, stays in the pool.
            #expect(try await pool.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self) == 1)
            #expect(try await pool.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self) == backend)

            // Each statement of the opening is a query of its own, which may bind values; Citus replays the
            // whole query string of a SET LOCAL on the workers.
            let seen = try await pool.withTransaction(
                opening: [
                    "SELECT set_config('rbac.seen', current_query(), true)",
                    "SELECT set_config('rbac.bound', \("a 'bound' value"), true)",
                ]
            ) {
                try await $0.query(
                    "SELECT current_setting('rbac.seen') AS seen, current_setting('rbac.bound') AS bound")
            }
            #expect(
                try seen[0].decode("seen", as: String.self) == "SELECT set_config('rbac.seen', current_query(), true)")
            #expect(try seen[0].decode("bound", as: String.self) == "a 'bound' value")
        }
    }

    @Test(
        "a serialization failure between two SERIALIZABLE transactions is retried, and the rule holds",
        arguments: 0..<10)
    func serializationRetry(round: Int) async throws {
        // Write skew: each transaction takes a doctor off call if another is still on call. Run concurrently
        // under SERIALIZABLE, one must fail with 40001; withTransaction runs it again, and it then sees the
        // other's write and leaves its doctor on call.
        try await TestDatabase.withFreshPool(maxConnections: 2) { pool in
            try await pool.query("CREATE TABLE doctors (name text PRIMARY KEY, on_call bool NOT NULL)")
            try await pool.query("INSERT INTO doctors VALUES ('alice', true), ('bob', true)")
            let attempts = Counter()
            _ = try await race(2) { index, go in
                let name = ["alice", "bob"][index]
                try await pool.withTransaction(isolation: .serializable) { connection in
                    let attempt = await attempts.increment()
                    let onCall = try await connection.query("SELECT count(*) AS n FROM doctors WHERE on_call")
                    if attempt <= 2 { await go() }  // both have read before either writes
                    if try onCall[0].decode("n", as: Int.self) >= 2 {
                        try await connection.query("UPDATE doctors SET on_call = false WHERE name = \(name)")
                    }
                }
            }
            // Two first attempts, then at least one retry (a retry may itself collide while the other is open).
            #expect(await attempts.value >= 3, "the conflicting transaction should have been retried")
            let rows = try await pool.query("SELECT count(*) AS n FROM doctors WHERE on_call")
            #expect(try rows[0].decode("n", as: Int.self) == 1)
        }
    }

    @Test("cancelling a task running pg_sleep(30) returns within about a second and the connection stays usable")
    func cancellation() async throws {
        try await TestDatabase.withFresh { configuration in
            let connection = try await PostgresConnection.connect(configuration)
            let observer = try await PostgresConnection.connect(configuration)
            let sleeper = Task { try await connection.query("SELECT pg_sleep(30)") }
            // Wait until the server is really running the statement, so the cancel has something to cancel.
            let running = try await eventually(within: .seconds(10)) {
                let rows = try await observer.query(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = \(connection.backendPID) AND state = 'active'"
                )
                return try rows[0].decode("n", as: Int.self) == 1
            }
            try #require(running, "the statement never ran")
            let cancelledAt = ContinuousClock.now
            sleeper.cancel()
            await #expect(throws: CancellationError.self) { try await sleeper.value }
            #expect(ContinuousClock.now - cancelledAt < .seconds(2))
            #expect(try await connection.query("SELECT 1 AS one")[0].decode("one", as: Int32.self) == 1)
            await connection.close()
            await observer.close()
        }
    }

    @Test("a statement over the configured statement timeout fails with 57014")
    func statementTimeout() async throws {
        try await TestDatabase.withFresh { configuration in
            var limited = configuration
            limited.settings["statement_timeout"] = "200"
            let connection = try await PostgresConnection.connect(limited)
            let error = await #expect(throws: PostgresError.self) { try await connection.query("SELECT pg_sleep(5)") }
            #expect(error?.sqlState == .queryCanceled)
            #expect(try await connection.query("SELECT 2 AS two")[0].decode("two", as: Int32.self) == 2)
            await connection.close()
        }
    }

    @Test("settings reach the session exactly, spaces and backslashes included, after the URL's own options")
    func settings() async throws {
        try await TestDatabase.withFresh { configuration in
            var configured = configuration
            configured.connectionString += " options='-c work_mem=5MB'"
            let label = "ana maría \\ -c statement_timeout=1\tx"
            configured.settings = ["rbac.actor_label": label, "statement_timeout": "7s"]
            let connection = try await PostgresConnection.connect(configured)
            let rows = try await connection.query(
                """
                SELECT current_setting('rbac.actor_label') AS label, current_setting('statement_timeout') AS timeout,
                       current_setting('work_mem') AS work_mem
                """)
            #expect(try rows[0].decode("label", as: String.self) == label)
            #expect(try rows[0].decode("timeout", as: String.self) == "7s")
            #expect(try rows[0].decode("work_mem", as: String.self) == "5MB")
            await connection.close()
        }
    }

    @Test("a NOTIFY from one connection arrives through another's listener")
    func notifications() async throws {
        try await TestDatabase.withFresh { configuration in
            let listener = try await PostgresConnection.connect(configuration)
            let notifications = try await listener.notifications(channels: ["membership_changed", "Odd \"channel\""])
            let sender = try await PostgresConnection.connect(configuration)
            try await sender.query("SELECT pg_notify('membership_changed', \("couple 42 it's changed"))")
            try await sender.query("SELECT pg_notify('Odd \"channel\"', 'second')")
            var iterator = notifications.makeAsyncIterator()
            let first = try await iterator.next()
            #expect(first?.channel == "membership_changed")
            #expect(first?.payload == "couple 42 it's changed")
            #expect(first?.senderPID == sender.backendPID)
            let second = try await iterator.next()
            #expect(second?.channel == "Odd \"channel\"")
            #expect(second?.payload == "second")
            await sender.close()
        }
    }

    @Test("the notification stream ends with an error when its connection is killed")
    func notificationConnectionLoss() async throws {
        try await TestDatabase.withFresh { configuration in
            let listener = try await PostgresConnection.connect(configuration)
            let notifications = try await listener.notifications(channels: ["anything"])
            let admin = try await PostgresConnection.connect(configuration)
            try await admin.query("SELECT pg_terminate_backend(\(listener.backendPID))")
            await #expect(throws: PostgresError.self) {
                for try await _ in notifications {}
            }
            await admin.close()
        }
    }

    @Test("a named prepared statement runs repeatedly, and a name cannot be reused for other SQL")
    func preparedStatements() async throws {
        try await TestDatabase.withFresh { configuration in
            let connection = try await PostgresConnection.connect(configuration)
            for n in 1...3 {
                let query: PostgresQuery = "SELECT \(n) * 2 AS doubled"
                let rows = try await connection.query(query.prepared(as: "double"))
                #expect(try rows[0].decode("doubled", as: Int.self) == n * 2)
            }
            let other: PostgresQuery = "SELECT \(1) + 1 AS n"
            let error = await #expect(throws: PostgresError.self) {
                try await connection.query(other.prepared(as: "double"))
            }
            #expect(error?.kind == .invalidQuery)
            await connection.close()
        }
    }

    @Test("a script of several statements runs, and stops at its first error")
    func scripts() async throws {
        try await TestDatabase.withFresh { configuration in
            let connection = try await PostgresConnection.connect(configuration)
            try await connection.runScript(
                "CREATE TABLE a (n int); INSERT INTO a VALUES (1); INSERT INTO a VALUES (2);")
            #expect(try await connection.query("SELECT count(*) AS n FROM a")[0].decode("n", as: Int.self) == 2)
            await #expect(throws: PostgresError.self) {
                try await connection.runScript("INSERT INTO a VALUES (3); SELECT 1/0; INSERT INTO a VALUES (4);")
            }
            #expect(try await connection.query("SELECT count(*) AS n FROM a")[0].decode("n", as: Int.self) == 2)
            await connection.close()
        }
    }
}

/// Counts attempts across concurrent transactions.
actor Counter {
    private(set) var value = 0
    func increment() -> Int {
        value += 1
        return value
    }
}
