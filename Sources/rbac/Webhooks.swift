import ArgumentParser
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct Webhooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Endpoints that receive events, signed per Standard Webhooks (secrets shown once).",
            discussion: """
                Events: \(PostgresOutbox.eventTypes.joined(separator: ", ")). Each delivery is a JSON POST with \
                webhook-id (stable: deduplicate on it), webhook-timestamp and webhook-signature; 2xx is \
                delivered, 410 disables the endpoint (until edit --enable), anything else is retried (5s, 5m, \
                30m, 2h, 5h, 10h, 10h; later when the endpoint's Retry-After asks, up to 10h).

                Example: rbac webhooks add --url https://app.example.com/hooks/rbac --event membership.created
                """,
            subcommands: [Add.self, List.self, Edit.self, Remove.self, RotateSecret.self, Ping.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add an endpoint; prints its secret once.",
                discussion: "Example: rbac webhooks add --url https://app.example.com/hooks/rbac --json")
            @Option(
                help: """
                    Its https URL, in printable ASCII (percent-encode other characters; an international domain \
                    in its xn-- form).
                    """) var url: String
            @Option(help: "An event it receives (repeat for several; none: every event).") var event: [String] = []
            @OptionGroup var key: DeliveryKeyOptions
            @OptionGroup var options: OperatorOptions

            func run() async throws {
                // What was typed is refused before the key is looked for, so that a mistyped URL says so on a
                // machine that has no key yet.
                _ = try PostgresOutbox.webhookURL(url)
                try PostgresOutbox.validate(eventTypes: event)
                let key = try key.required()
                try await options.run { context in
                    let (endpoint, secret) = try await PostgresOutbox(pool: context.pool).addWebhook(
                        url: url, eventTypes: event, key: key)
                    try Webhooks.printSecret(endpoint, secret, options.output)
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List endpoints (never their secrets), with how many of their messages wait and died.",
                discussion: "Example: rbac webhooks list")

            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let listed = try await PostgresOutbox(pool: context.pool).webhooks()
                    try output.print(
                        listed,
                        Table(
                            headers: ["ID", "URL", "EVENTS", "WAITING", "DEAD", "DISABLED", "OLD SECRET SIGNS UNTIL"],
                            rows: listed.map {
                                [
                                    idText($0.endpoint.id), $0.endpoint.url,
                                    $0.endpoint.eventTypes.isEmpty
                                        ? "every event" : $0.endpoint.eventTypes.joined(separator: ","),
                                    String($0.waiting), String($0.dead), $0.endpoint.disabledAt?.iso8601 ?? "",
                                    $0.endpoint.previousSecretUntil?.iso8601 ?? "",
                                ]
                            }
                        ).rendered)
                }
            }
        }

        struct Edit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change an endpoint's URL or events, or send it events again after a 410; its secret stays.",
                discussion: """
                    Messages already waiting for it go to its URL as it now is. Those that died when it answered \
                    410 Gone stay dead: once it is enabled, rbac outbox retry-all --webhook ID takes them back.

                    Example: rbac webhooks edit ID --event membership.created --event membership.removed
                    """)
            @Argument(help: "The endpoint's id.") var id: String
            @Option(help: "Its new https URL.") var url: String?
            @Option(help: "An event it receives from now on (repeat; replaces the set).") var event: [String] = []
            @Flag(help: "It receives every event from now on.") var everyEvent = false
            @Flag(help: "Send it events again after it answered 410 Gone.") var enable = false
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                _ = try Parse.id(id, "webhook")
                guard url != nil || !event.isEmpty || everyEvent || enable else {
                    throw ValidationError("give what to change: --url, --event, --every-event or --enable")
                }
                guard !(everyEvent && !event.isEmpty) else {
                    throw ValidationError("--event and --every-event cannot go together")
                }
            }

            func run() async throws {
                // Refused as `add` refuses them, before the database is reached.
                _ = try url.map(PostgresOutbox.webhookURL)
                try PostgresOutbox.validate(eventTypes: event)
                try await options.run { context in
                    let events = everyEvent ? [] : event.isEmpty ? nil : event
                    let edited = try await PostgresOutbox(pool: context.pool).editWebhook(
                        try Parse.id(id, "webhook"), url: url, eventTypes: events, enable: enable)
                    try options.output.print(edited, "Edited webhook \(idText(edited.id)) \(edited.url)")
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove an endpoint, with the messages still waiting for it.",
                discussion: "Example: rbac webhooks remove ID")
            @Argument(help: "The endpoint's id.") var id: String
            @OptionGroup var options: OperatorOptions

            func validate() throws { _ = try Parse.id(id, "webhook") }

            func run() async throws {
                try await options.run { context in
                    let removed = try await PostgresOutbox(pool: context.pool).removeWebhook(
                        try Parse.id(id, "webhook"))
                    try options.output.print(removed, "Removed webhook \(idText(removed.id)) \(removed.url)")
                }
            }
        }

        struct RotateSecret: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "rotate-secret", abstract: "Give an endpoint a new secret; prints it once.",
                discussion: """
                    Deliveries carry a signature by the new secret and, for --keep-old, one by the old secret \
                    too, so that the receiver verifies them while it moves to the new one (Standard Webhooks \
                    verifiers accept either). A secret that leaked: --keep-old 0m. Rotating again within the \
                    time keeps only the secret it replaces.

                    Example: rbac webhooks rotate-secret ID --keep-old 1h
                    """)
            @Argument(help: "The endpoint's id.") var id: String
            @Option(
                help: ArgumentHelp(
                    "How long the old secret keeps signing beside the new one: 0m to 30d.", valueName: "duration"))
            var keepOld = Lifetime(argument: "24h")!
            @OptionGroup var key: DeliveryKeyOptions
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                _ = try Parse.id(id, "webhook")
                guard keepOld.duration <= .seconds(30 * 86_400) else {
                    throw ValidationError("--keep-old must be at most 30d, not \(keepOld.defaultValueDescription)")
                }
            }

            func run() async throws {
                let key = try key.required()
                try await options.run { context in
                    let (endpoint, secret) = try await PostgresOutbox(pool: context.pool).rotateSecret(
                        try Parse.id(id, "webhook"), key: key, keepingOld: keepOld.duration)
                    try Webhooks.printSecret(endpoint, secret, options.output)
                }
            }
        }

        struct Ping: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Queue a webhook.ping for an endpoint, to check that it is reached and verifies it.",
                discussion: """
                    The ping goes to this endpoint alone, whatever events it takes, signed as every event is, and \
                    a running rbac serve or rbac deliver sends it. With --wait, this command waits for its first \
                    attempt and says how it went: exit 0 when the endpoint took it, 1 when it did not or no \
                    worker sent it in time. Without, rbac outbox list --webhook ID --event webhook.ping tells.

                    Example: rbac webhooks ping ID --wait 10s
                    """)
            @Argument(help: "The endpoint's id.") var id: String
            @Option(
                help: ArgumentHelp(
                    "How long to wait for a worker to send it (1s to 600s), then say how it went.",
                    valueName: "duration"))
            var wait: ShortDuration?
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                _ = try Parse.id(id, "webhook")
                try wait?.require("--wait", from: "1s", to: "600s")
            }

            func run() async throws {
                let taken = try await options.run { context in
                    let webhook = try Parse.id(id, "webhook")
                    let outbox = PostgresOutbox(pool: context.pool)
                    var ping = try await outbox.ping(webhook)
                    guard let wait else {
                        try options.output.print(
                            ping,
                            """
                            Queued webhook.ping \(idText(ping.id)) for webhook \(idText(webhook)): \
                            rbac outbox list --webhook \(idText(webhook)) --event webhook.ping tells how it went.
                            """)
                        return true
                    }
                    // Until its first attempt has an outcome: delivered, or failed with what the endpoint answered.
                    let deadline = ContinuousClock.now + wait.duration
                    while ping.status == "pending" && ping.lastError == nil && ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(100))
                        ping = try await outbox.message(ping.id)
                    }
                    let said =
                        if let delivered = ping.deliveredAt {
                            "Webhook \(idText(webhook)) took webhook.ping \(idText(ping.id)) at \(delivered.iso8601)."
                        } else if let error = ping.lastError {
                            "Webhook \(idText(webhook)) did not take webhook.ping \(idText(ping.id)): \(error)"
                        } else {
                            """
                            No worker sent webhook.ping \(idText(ping.id)) within \(wait.defaultValueDescription): is \
                            rbac serve or rbac deliver running on this database?
                            """
                        }
                    try options.output.print(ping, said)
                    return ping.deliveredAt != nil
                }
                if !taken { throw ExitCode(ExitStatus.denied.rawValue) }
            }
        }

        static func printSecret(_ endpoint: WebhookEndpoint, _ secret: String, _ output: OutputOptions) throws {
            struct Shown: Encodable {
                let endpoint: WebhookEndpoint
                let secret: String
            }
            try output.print(
                Shown(endpoint: endpoint, secret: secret),
                "Webhook \(idText(endpoint.id)) \(endpoint.url) (secret shown once; stored sealed):\n\(secret)")
        }
    }
}
