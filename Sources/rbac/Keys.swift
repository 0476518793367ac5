import ArgumentParser
import Collaboration
import Foundation
import Logging
import NIOCore
import Postgres
import Prometheus
import Server
import Storage

extension RBAC {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "API keys for backend services (shown once, stored hashed).",
            discussion: "Example: rbac keys create --name billing",
            subcommands: [Create.self, List.self, Revoke.self])

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create a key; prints it once.",
                discussion: "Example: rbac keys create --name billing --json")
            @Option(help: "What the key is for, e.g. the service's name.") var name: String
            @OptionGroup var options: OperatorOptions

            func run() async throws {
                try await options.run { context in
                    let (key, secret) = try await ServiceKeyService(
                        repository: PostgresServiceKeyRepository(pool: context.pool)
                    )
                    .create(name: name)
                    if options.output.json {
                        struct Created: Encodable {
                            let key: ServiceKey
                            let secret: String
                        }
                        return try printJSON(Created(key: key, secret: secret.rawValue))
                    }
                    print(
                        "Key \(idText(key.id)) \(quoted(key.name)) (shown once; only its hash is stored):"
                    )
                    print(secret.rawValue)
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List keys (never the keys themselves), with when each last authenticated a request.",
                discussion: """
                    rbac serve records the keys it saw every --sweep-interval (60s) and as it stops: a key to retire \
                    shows here whether anything still sends it.

                    Example: rbac keys list
                    """)
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let keys = try await PostgresServiceKeyRepository(pool: context.pool).keys()
                    try output.print(
                        keys,
                        Table(
                            headers: ["ID", "NAME", "CREATED", "REVOKED", "LAST USED"],
                            rows: keys.map {
                                [
                                    idText($0.id), $0.name, $0.createdAt.iso8601, $0.revokedAt?.iso8601 ?? "",
                                    $0.lastUsedAt?.iso8601 ?? "never",
                                ]
                            }
                        ).rendered)
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Revoke a key at once.", discussion: "Example: rbac keys revoke ID")
            @Argument(help: "The key's id.") var id: String
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                _ = try Parse.id(id, "key")
            }

            func run() async throws {
                try await options.run { context in
                    let (key, revokedNow) = try await PostgresServiceKeyRepository(pool: context.pool).revokeKey(
                        try Parse.id(id, "key"))
                    let named = "key \(idText(key.id)) \(quoted(key.name))"
                    try options.output.print(
                        key,
                        revokedNow
                            ? "Revoked \(named)"
                            : "The \(named) was revoked already, at \(key.revokedAt?.iso8601 ?? "?"): nothing changed")
                }
            }
        }
    }
}
