import ArgumentParser
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct Sweep: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record the memberships and invitations that expired: audit entries and outbox events.",
            discussion: """
                Expiry needs no sweep: from the instant a membership expires it grants nothing. The sweep only \
                writes down what happened (membership.expired, invitation.expired), once each, for expiries of \
                the last 30 days; rbac serve sweeps every --sweep-interval on its own.
                """)
        @Option(help: "Record at most this many of each kind in one go (1 to 100000).") var limit: Int = 1000
        @OptionGroup var options: OperatorOptions

        func validate() throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 100000") }
        }

        func run() async throws {
            try await options.run { context in
                var total = ExpirySweep(memberships: 0, invitations: 0)
                // Until a sweep records fewer than it may: what expires meanwhile waits for the next.
                while true {
                    let swept = try await context.repository.sweepExpired(limit: limit)
                    total = ExpirySweep(
                        memberships: total.memberships + swept.memberships,
                        invitations: total.invitations + swept.invitations)
                    guard swept.memberships == limit || swept.invitations == limit else { break }
                }
                try options.output.print(
                    total,
                    "recorded \(total.memberships) expired membership(s) and \(total.invitations) expired invitation(s)"
                )
            }
        }
    }
}
