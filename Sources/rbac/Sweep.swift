import ArgumentParser
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct Sweep: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: """
                Record the memberships and invitations that expired (audit entries and outbox events), and delete \
                outbox messages and answers kept long enough.
                """,
            discussion: """
                Expiry needs no sweep: from the instant a membership expires it grants nothing. The sweep only \
                writes down what happened (membership.expired, invitation.expired), once each, for expiries of \
                the last 30 days. It then deletes the outbox messages sent more than --keep-sent ago and those \
                dead more than --keep-dead ago (waiting ones stay), and the answers kept a day for requests sent \
                with an Idempotency-Key. rbac serve sweeps every --sweep-interval on its own.

                On Citus, expiries whose couple's worker cannot be reached are left for a later sweep, the rest \
                recorded, and the sweep exits 5 once done, naming the worker.

                Example: rbac sweep --keep-sent 1d
                """)
        @Option(parsing: .unconditional, help: "Record at most this many of each kind in one go (1 to 100000).")
        var limit: Int = 1000
        @OptionGroup var keeping: OutboxKeepingOptions
        @OptionGroup var options: OperatorOptions

        func validate() throws {
            guard (1...100_000).contains(limit) else {
                throw ValidationError("--limit must be from 1 to 100000, not \(limit)")
            }
        }

        func run() async throws {
            let swept = try await options.run { context in
                let swept = try await context.repository.sweepExpired(limit: limit) { sofar in
                    printError(
                        """
                        rbac: recorded \(sofar.memberships) expired membership(s) and \(sofar.invitations) expired \
                        invitation(s) so far
                        """)
                }
                let pruned = try await PostgresOutbox(pool: context.pool).prune(
                    keepSent: keeping.keepSent.duration, keepDead: keeping.keepDead.duration
                ) { sofar in
                    printError("rbac: deleted \(sofar.sent) sent and \(sofar.dead) dead outbox message(s) so far")
                }
                let answers = try await PostgresIdempotentRequests(pool: context.pool).prune()
                struct Swept: Encodable {
                    /// The expiries recorded of each kind, and those left for a later sweep (`unreached`): their
                    /// couple's Citus worker could not be reached.
                    let memberships, invitations, unreached: Int
                    /// Those workers (host:port).
                    let unreachedWorkers: [String]
                    /// The outbox messages deleted.
                    let outbox: OutboxPruning
                    /// The answers to requests sent with an Idempotency-Key deleted.
                    let keptAnswers: Int
                }
                try options.output.print(
                    Swept(
                        memberships: swept.memberships, invitations: swept.invitations, unreached: swept.unreached,
                        unreachedWorkers: swept.unreachedWorkers, outbox: pruned, keptAnswers: answers),
                    """
                    recorded \(swept.memberships) expired membership(s) and \(swept.invitations) expired \
                    invitation(s); deleted \(pruned.sent) sent and \(pruned.dead) dead outbox message(s) and \
                    \(answers) kept answer(s)
                    """)
                return swept
            }
            if swept.unreached > 0 {
                printError(
                    """
                    rbac: \(swept.unreached) expiry(ies) wait for a later sweep: the Citus worker holding their \
                    couples' audit logs could not be reached: \(swept.unreachedWorkers.joined(separator: ", ")) \
                    (the rest were recorded); sweep again once it is back
                    """)
                throw ExitCode(ExitStatus.databaseUnavailable.rawValue)
            }
        }
    }
}
