import ArgumentParser
import Delivery
import Foundation
import OutboundHTTP
import Storage
import UnixSignals

extension RBAC {
    struct Deliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send the outbox's messages (rbac serve does too); with --once, what is due now, then exit.",
            discussion: """
                Several workers may run on one database: each claims due messages with SKIP LOCKED. On SIGINT or \
                SIGTERM it stops, and what it was sending is due again at once; a message whose worker died is \
                taken up again a minute later. An idle worker looks for due messages every 200 ms. \
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
            try await options.run { context in
                let worker = OutboxWorker(
                    outbox: PostgresOutbox(pool: context.pool),
                    http: OutboundHTTP(.init(totalTimeout: .seconds(15), caFile: caFile)), key: key,
                    mail: try mail.mail(caFile: caFile), links: try CommandContext.publicBaseURL())
                if once {
                    var outcomes: [String: Int] = [:]
                    while true {
                        let round = try await worker.runOnce()
                        if round.isEmpty { break }
                        for outcome in round { outcomes[outcome.rawValue, default: 0] += 1 }
                    }
                    try options.output.print(
                        outcomes,
                        outcomes.isEmpty
                            ? "Nothing was due."
                            : outcomes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
                                separator: ", "))
                } else {
                    await withTaskGroup { group in
                        group.addTask { await worker.run { printError("rbac: \($0)") } }
                        group.addTask {
                            for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { return }
                        }
                        await group.next()
                        group.cancelAll()
                    }
                }
            }
        }
    }
}
