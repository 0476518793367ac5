import ArgumentParser
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct Outbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The messages waiting, sent and dead in the outbox.",
            discussion: "Example: rbac outbox list --status dead",
            subcommands: [List.self, Retry.self, RetryAll.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The messages, newest first, with when each was written, is due again and was delivered.",
                discussion: "Example: rbac outbox list --couple C --event invitation.created --limit 100")
            @Option(help: "Only pending, sent or dead ones.") var status: String?
            @OptionGroup var filter: Filter
            @OptionGroup var page: PageOptions<Date>
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws { try Filter.validate(status: status) }

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let outbox = PostgresOutbox(pool: context.pool)
                    try await page.print(output, Outbox.columns) { limit, after in
                        try await outbox.messages(
                            status: status, couple: try filter.coupleID(), event: filter.event,
                            webhook: try filter.webhookID(), limit: limit, after: after)
                    }
                }
            }
        }

        struct Retry: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Put a waiting or dead message back in the queue, due now.",
                discussion: """
                    Not a sent one, nor one for an endpoint that answered 410 Gone (until webhooks edit --enable), nor \
                    an invitation email whose link is gone (it died, or the invitation is settled: invite again), \
                    nor one a worker is sending right now (exit 4, saying until when it has to answer).

                    Example: rbac outbox retry ID
                    """)
            @Argument(help: "The message's id.") var id: String
            @OptionGroup var options: OperatorOptions

            func validate() throws { _ = try Parse.id(id, "message") }

            func run() async throws {
                try await options.run { context in
                    let message = try await PostgresOutbox(pool: context.pool).retry(try Parse.id(id, "message"))
                    try options.output.print(message, Outbox.columns.table([message]).rendered)
                }
            }
        }

        struct RetryAll: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Put every waiting and dead message back in the queue, due now, as retry would each.",
                discussion: """
                    For an endpoint that was down past the retry schedule: its messages died meanwhile. Those \
                    that retry would refuse stay as they are, counted by why.

                    Example: rbac outbox retry-all --status dead --webhook ID
                    """)
            @Option(help: "Only pending or dead ones.") var status: String?
            @OptionGroup var filter: Filter
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                do { try PostgresOutbox.validate(retrying: status, event: nil) } catch {
                    throw ValidationError(error.message)
                }
            }

            func run() async throws {
                try await options.run { context in
                    let retries = try await PostgresOutbox(pool: context.pool).retryAll(
                        status: status, couple: try filter.coupleID(), event: filter.event,
                        webhook: try filter.webhookID())
                    let left = [
                        (retries.webhookGone, "for webhooks that answered 410 Gone (rbac webhooks edit ID --enable)"),
                        (retries.linkGone, "invitation emails whose link is gone (invite again)"),
                        (retries.beingSent, "being sent by a worker"),
                    ].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }
                    try options.output.print(
                        retries,
                        "Put \(retries.retried) message(s) back in the queue, due now"
                            + (left.isEmpty ? "." : "; left as they were: \(left.joined(separator: ", ")).")
                    )
                }
            }
        }

        /// Which messages `list` and `retry-all` are about, beside their status.
        struct Filter: ParsableArguments {
            @Option(help: ArgumentHelp("Only the couple's messages.", valueName: "id")) var couple: String?
            @Option(
                help: ArgumentHelp("Only messages of one event type, such as invitation.created.", valueName: "type"))
            var event: String?
            @Option(help: ArgumentHelp("Only messages to one webhook endpoint.", valueName: "id")) var webhook: String?

            func validate() throws {
                do { try PostgresOutbox.validate(status: nil, event: event) } catch {
                    throw ValidationError(error.message)
                }
                _ = try coupleID()
                _ = try webhookID()
            }

            func coupleID() throws -> UUID? { try couple.map(Parse.couple) }
            func webhookID() throws -> UUID? { try webhook.map { try Parse.id($0, "webhook") } }

            static func validate(status: String?) throws {
                do { try PostgresOutbox.validate(status: status, event: nil) } catch {
                    throw ValidationError(error.message)
                }
            }
        }

        static let columns = Columns<OutboxMessage>(
            headers: ["ID", "EVENT", "CHANNEL", "STATUS", "ATTEMPTS", "CREATED", "NEXT", "DELIVERED", "LAST ERROR"]
        ) {
            [
                idText($0.id), $0.eventType, $0.channel, $0.status, String($0.attempts), $0.createdAt.iso8601,
                $0.status == "pending" ? $0.nextAttemptAt.iso8601 : "", $0.deliveredAt?.iso8601 ?? "",
                $0.lastError ?? "",
            ]
        }
    }
}
