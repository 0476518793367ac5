import ArgumentParser
import Delivery
import Foundation
import OutboundHTTP
import Storage
import Synchronization
import UnixSignals

extension RBAC {
    struct Deliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send the outbox's messages (rbac serve does too); with --once, what is due now, then exit.",
            discussion: """
                Several workers may run on one database: each claims due messages with SKIP LOCKED. On SIGINT or \
                SIGTERM it stops, and what it was sending is due again at once (with --once, it prints what it \
                sent and exits 130 or 143, as a shell reports a command the signal ended); a message whose worker \
                died is taken up again a minute later. An idle worker looks for due messages every 200 ms; while \
                the database cannot be reached, even at the start, it says so once and tries every 5 s (with \
                --once, it exits 5). \
                Sent and dead messages stay until a sweep deletes them (rbac serve, or rbac sweep from cron).

                Example: rbac deliver --once --json
                """)
        @Flag(help: "Send what is due now, then exit.") var once = false
        @Option(help: ArgumentHelp("A PEM file of CAs to trust for endpoints (a private CA).", valueName: "path"))
        var caFile: String?
        @OptionGroup var key: DeliveryKeyOptions
        @OptionGroup var mail: MailOptions
        @OptionGroup var options: OperatorOptions

        func run() async throws {
            let key = try key.required()
            // Trapped from the start, so that a signal that comes while it connects stops it as one later does.
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            // Without --once it is a service: started while the database is down, it waits for it. Its locks are
            // those of events being written, held for moments, so it waits them out rather than bound the wait.
            let stopped = try await options.run(waitingForDatabase: !once, lockWaits: nil) { context -> UnixSignal? in
                let worker = OutboxWorker(
                    outbox: PostgresOutbox(pool: context.pool),
                    http: OutboundHTTP(.init(totalTimeout: .seconds(15), caFile: caFile)), key: key,
                    mail: try mail.mail(caFile: caFile), links: try CommandContext.publicBaseURL())
                guard once else {
                    _ = try await Self.untilSignalled(signals) { await worker.run { printError("rbac: \($0)") } }
                    return nil
                }
                let outcomes = Mutex<[String: Int]>([:])
                let signal = try await Self.untilSignalled(signals) {
                    while true {
                        let round = try await worker.runOnce()
                        if round.isEmpty { return }
                        outcomes.withLock { for outcome in round { $0[outcome.rawValue, default: 0] += 1 } }
                    }
                }
                let counts = outcomes.withLock { $0 }
                try options.output.print(
                    counts,
                    counts.isEmpty
                        ? (signal == nil ? "Nothing was due." : "Nothing was sent.")
                        : counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
                            separator: ", "))
                return signal
            }
            // With --once, stopped before the outbox was drained: what it did is printed, and the exit says it did
            // not finish, as a shell's does for a command a signal ended.
            if let stopped {
                let name = "\(stopped)".uppercased()
                printNote(
                    json: options.output.json, "stopped by \(name); what it was sending is due again", "stopped_by",
                    name)
                throw ExitCode(128 + stopped.rawValue)
            }
        }

        /// Runs `body` until it returns or one of `signals` comes, which cancels it; the signal, if one came (one
        /// that came before, at once). Sending stops within a moment of cancellation, giving back what it had claimed.
        private static func untilSignalled(
            _ signals: UnixSignalsSequence, _ body: @escaping @Sendable () async throws -> Void
        ) async throws -> UnixSignal? {
            try await withThrowingTaskGroup(of: UnixSignal?.self) { group in
                group.addTask {
                    try await body()
                    return nil
                }
                group.addTask {
                    for await signal in signals { return signal }
                    return nil
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        }
    }
}
