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
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
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

            let dump = try await pool.dump()
            #expect(dump.contains(token.hash.hexString), "the dump should hold the token's SHA-256")
            #expect(!dump.contains(token.rawValue.dropFirst(4)), "the dump must not hold the token")
            #expect(!dump.contains(Base64URL.encode(token.hash)))
        }
    }
}
