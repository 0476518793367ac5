import Foundation
import Postgres
import Storage

/// A database set up once per test run and copied for every test that starts from it
/// (`TestDatabase.withFresh(from:)`). A copy costs what creating an empty database costs; setting one up again
/// for each test costs more, most on Citus, where each node creates the extension and distributing creates
/// shards.
public struct DatabaseTemplate: Sendable {
    let label: String
    let setUp: @Sendable (PostgresConnectionPool) async throws -> Void

    /// `label` names the template's database (`template_LABEL_...`); `setUp` fills it once.
    public init(_ label: String, setUp: @escaping @Sendable (PostgresConnectionPool) async throws -> Void) {
        self.label = label
        self.setUp = setUp
    }

    /// The project's migrations and access policy applied, and distributed when the tests run on Citus.
    public static let migrated = DatabaseTemplate("migrated") { pool in
        try await migrate(pool, distribute: !TestDatabase.citusWorkers.isEmpty)
    }

    /// Applies the project's migrations and access policy to `pool`'s database; `distribute` distributes it on
    /// a Citus coordinator.
    public static func migrate(_ pool: PostgresConnectionPool, distribute: Bool) async throws {
        try await MigrationRunner.load(from: repositoryRoot.appendingPathComponent("sql")).migrate(
            pool, distribute: distribute)
        try await AccessPolicy.load(from: repositoryRoot.appendingPathComponent("policies")).apply(pool)
    }
}

/// The templates this test run has made, each made by the first test that asks for it.
actor DatabaseTemplates {
    static let shared = DatabaseTemplates()
    private var made: [String: Task<String, any Error>] = [:]

    /// Creates `name` on every node as a copy of `template`'s database there, with the template's database
    /// settings (Citus's among them), which PostgreSQL does not copy.
    func copy(_ template: DatabaseTemplate, to name: String) async throws {
        let source = try await self.name(of: template)
        try await TestDatabase.changingDatabases { try await Self.copy(source, to: name) }
    }

    private static func copy(_ source: String, to name: String) async throws {
        try await TestDatabase.onEachNode { admin in
            try await admin.execute("CREATE DATABASE \(identifier: name) TEMPLATE \(identifier: source)")
            let settings = try await admin.query(
                """
                SELECT unnest(s.setconfig) AS setting FROM pg_db_role_setting s
                JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = \(source) AND s.setrole = 0
                """)
            for row in settings {
                let setting: String = try row.decode("setting")
                guard let equals = setting.firstIndex(of: "=") else { continue }
                let value = String(setting[setting.index(after: equals)...])
                try await admin.execute(
                    "ALTER DATABASE \(identifier: name) SET \(identifier: String(setting[..<equals])) TO \(literal: value)"
                )
            }
        }
    }

    private func name(of template: DatabaseTemplate) async throws -> String {
        if let task = made[template.label] { return try await task.value }
        let task = Task { try await Self.make(template) }
        made[template.label] = task
        return try await task.value
    }

    private static func make(_ template: DatabaseTemplate) async throws -> String {
        let name = "template_\(template.label)_" + UUID().uuidString.lowercased().prefix(8)
        try await TestDatabase.settingUp {
            try await TestDatabase.createEmpty(name)
            let pool = PostgresConnectionPool(configuration: try TestDatabase.server(database: name), maxConnections: 2)
            try await ensuring {
                try await template.setUp(pool)
            } finally: {
                await pool.close()
            }
        }
        // A database is copied only while no one is connected to it.
        try await TestDatabase.closeToSessions(name)
        return name
    }
}
