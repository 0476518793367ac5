import ChildProcess
import Foundation
import Postgres
import Secrets
import TestSupport
import Testing

@Suite("Invitation tokens in the database")
struct TokenStorageTests {
    @Test("the raw token never reaches the database: a full dump holds its hash, never the token")
    func rawTokenNeverStored() async throws {
        try await MigratedDatabase.withPool { pool in
            let owner = try await pool.newUser()
            let couple = try await pool.newCouple(members: [(owner, "owner")])
            let token = SecretToken.generate(.invitation)
            let hash = Data(token.hash)
            try await pool.acting(as: owner) { connection in
                try await connection.query("SELECT create_invitation(\(couple), \(hash), 'viewer')")
                _ = try await connection.query("SELECT * FROM invitation_preview(\(hash))")
            }
            let invitee = try await pool.newUser()
            try await pool.acting(as: invitee) { connection in
                _ = try await connection.query("SELECT * FROM accept_invitation(\(hash))")
            }

            let database: String = try await pool.query("SELECT current_database() AS db")[0].decode("db")
            let dump = try await pgDump(database: database)
            #expect(dump.contains(token.hash.hexString), "the dump should hold the token's SHA-256")
            #expect(!dump.contains(token.rawValue.dropFirst(4)), "the dump must not hold the token")
            #expect(!dump.contains(Base64URL.encode(token.hash)))
        }
    }

    private func pgDump(database: String) async throws -> String {
        guard let bin = ProcessInfo.processInfo.environment["PG_BINDIR"] else {
            throw TestSetupError("PG_BINDIR is not set; run the tests through scripts/with-postgres")
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-dump-\(UUID().uuidString).sql")
        defer { try? FileManager.default.removeItem(at: output) }
        let dump = try await ChildProcess.run(bin + "/pg_dump", ["--data-only", "--file", output.path, database])
        guard dump.status == 0 else { throw TestSetupError("pg_dump failed: \(dump.errorOutput)") }
        return try String(contentsOf: output, encoding: .utf8)
    }
}
