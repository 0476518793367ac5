import ChildProcess
import Collaboration
import Foundation
import Postgres
import Storage
import TestSupport

/// What the storage tests do to a test database besides the repositories' own calls: dump it, act as an end
/// user, add users and couples directly, count rows.
extension PostgresConnectionPool {
    /// The database's data as `pg_dump --data-only` writes it: what a stolen backup holds.
    func dump() async throws -> String {
        guard let bin = ProcessInfo.processInfo.environment["PG_BINDIR"] else {
            throw TestSetupError("PG_BINDIR is not set; run the tests through scripts/with-postgres")
        }
        let database: String = try await query("SELECT current_database() AS db")[0].decode("db")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-dump-\(UUID().uuidString).sql")
        defer { try? FileManager.default.removeItem(at: output) }
        let dump = try await ChildProcess.run(bin + "/pg_dump", ["--data-only", "--file", output.path, database])
        guard dump.status == 0 else { throw TestSetupError("pg_dump failed: \(dump.errorOutput)") }
        return try String(contentsOf: output, encoding: .utf8)
    }

    /// Runs `body` in a transaction acting for the end user `user`, as PostgREST does with a verified JWT.
    @discardableResult
    func acting<T: Sendable>(
        as user: UUID, isolation: PostgresConnection.IsolationLevel = .readCommitted,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withTransaction(isolation: isolation, maxAttempts: 1) { connection in
            try await connection.act(as: user)
            return try await body(connection)
        }
    }

    /// One call of a race (`race`): `sql` once `go` lets it start, straight to SQL, as the end user `user` or, with
    /// nil, as the operator (no claims). What it came to; never run again, so a deadlock shows as `40P01`.
    func racing(_ sql: PostgresQuery, as user: UUID?, after go: @Sendable () async -> Void) async throws -> Outcome {
        try await Outcome.of {
            let call = { (connection: PostgresConnection) in
                await go()
                try await connection.query(sql)
            }
            if let user { try await acting(as: user, call) } else { try await withTransaction(maxAttempts: 1, call) }
        }
    }

    /// What each of `calls` came to, made at once (`racing`), each as its end user or, with nil, as the operator:
    /// the n-th outcome is the n-th call's.
    func race(_ calls: [(PostgresQuery, as: UUID?)]) async throws -> [Outcome] {
        try await race(inTurn: calls.map { [$0] }).map { $0[0] }
    }

    /// `race`, with racers that make their calls in turn, each in its own transaction, the next only after the one
    /// before succeeded (an invitation made and then accepted): the n-th list holds what the n-th racer's calls
    /// came to, up to the first refused, so that a racer refused at its first call and one refused at its second
    /// tell apart where the others landed between them.
    func race(inTurn racers: [[(PostgresQuery, as: UUID?)]]) async throws -> [[Outcome]] {
        try await TestSupport.race(racers.count) { index, go in
            var outcomes: [Outcome] = []
            for (turn, call) in racers[index].enumerated() where outcomes.last ?? .success == .success {
                outcomes.append(try await self.racing(call.0, as: call.as, after: turn == 0 ? go : {}))
            }
            return outcomes
        }
    }

    /// A new user with a unique email address.
    func newUser() async throws -> UUID {
        let email = "user-\(UUID().uuidString.lowercased())@example.com"
        return try await query("INSERT INTO users (email) VALUES (\(email)) RETURNING id")[0].decode("id")
    }

    /// A new couple whose members hold the given roles (the first should be an owner).
    func newCouple(members: [(UUID, String)]) async throws -> UUID {
        try await withTransaction { connection in
            let couple: UUID = try await connection.query("INSERT INTO couples (name) VALUES ('Race') RETURNING id")[0]
                .decode("id")
            for (user, role) in members {
                try await connection.query(
                    "INSERT INTO memberships (couple_id, user_id, role) VALUES (\(couple), \(user), \(role))")
            }
            return couple
        }
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query)[0].decode(column: 0)
    }
}

extension PostgresConnection {
    /// Acts for the end user `user` to the end of the transaction under way, as PostgREST does with a verified JWT.
    func act(as user: UUID) async throws {
        let claims = try PostgresJSON(encoding: ["sub": user.uuidString.lowercased()])
        try await runScript("SET LOCAL \"request.jwt.claims\" = \(literal: claims.text)")
    }
}

/// What one racing call came to: success, or what it was refused with: the code of a service, the SQLSTATE of one
/// of the functions' own errors (class RB), or for any other error of the server all PostgreSQL said of it (its
/// SQLSTATE, constraint, message and detail), so that a race that fails once in many runs says where.
enum Outcome: Hashable, Sendable {
    case success
    case refused(String)

    static func of(_ body: () async throws -> Void) async throws -> Outcome {
        do {
            try await body()
            return .success
        } catch let error as PostgresError where error.kind == .server {
            if let state = error.sqlState, state.errorClass == "RB" { return .refused(state.rawValue) }
            return .refused(error.debugDescription)
        } catch let error as any CodedError {
            return .refused(error.codeName)
        }
    }
}

/// What each of `calls` came to, made at once (`race`): the n-th outcome is the n-th call's.
func race(_ calls: [@Sendable () async throws -> Void]) async throws -> [Outcome] {
    try await race(calls.count) { index, go in
        await go()
        return try await Outcome.of(calls[index])
    }
}
