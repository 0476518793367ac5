import ArgumentParser
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct DeliveryKeyCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delivery-key",
            abstract: "Check the delivery key against the database's, or move the database to a new one.",
            discussion: """
                The database holds webhook secrets and invitation links sealed under one delivery key, which it \
                never sees; a check sealed under it tells that key from any other. A worker (rbac serve, rbac \
                deliver) holding another key sends nothing and says so, leaving every message for a worker with \
                the database's key, and commands that seal refuse it (exit 4).

                Example: rbac delivery-key check --delivery-key-file /etc/rbac/delivery.key
                """,
            subcommands: [Check.self, Rotate.self])

        struct Check: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Whether the delivery key is the database's (exit 0), or not (exit 4).",
                discussion: """
                    Before anything is sealed or sent, any key will do, and becomes the database's when it first \
                    seals or sends.

                    Example: RBAC_DELIVERY_KEY_FILE=/etc/rbac/delivery.key rbac delivery-key check
                    """)
            @OptionGroup var key: DeliveryKeyOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                let key = try key.required()
                let matches = try await CommandContext.run(database) { context in
                    try await PostgresOutbox(pool: context.pool).keyMatches(key)
                }
                if matches == false { throw CommandFailure(DeliveryKeyMismatch()) }
                struct Checked: Encodable {
                    let matches = true
                    /// Whether anything is sealed yet (under any key).
                    let sealed: Bool
                }
                try output.print(
                    Checked(sealed: matches != nil),
                    matches == nil
                        ? "Nothing is sealed yet: this key becomes the database's when it first seals or sends."
                        : "This delivery key is the database's.")
            }
        }

        struct Rotate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Re-seal every webhook secret and invitation link under a new delivery key.",
                discussion: """
                    In one transaction, so workers see everything under one key or the other: those still \
                    holding the old key send nothing from then on, until restarted with the new one. Webhook \
                    secrets stay the same, for receivers; for a key that leaked, rotate them too (rbac webhooks \
                    rotate-secret ID --keep-old 0m). The new key is --delivery-key-file, or RBAC_DELIVERY_KEY \
                    as elsewhere.

                    Example: rbac delivery-key rotate --old-key-file old.key --delivery-key-file new.key
                    """)
            @Option(help: ArgumentHelp("File holding the database's key until now.", valueName: "path"))
            var oldKeyFile: String
            @OptionGroup var key: DeliveryKeyOptions
            @OptionGroup var options: OperatorOptions

            func run() async throws {
                guard let old = try DeliveryKeyOptions.load(file: oldKeyFile, [:]) else {
                    throw CommandFailure(.usage, "cannot read the delivery key file \(oldKeyFile)")
                }
                let new = try key.required()
                let rotation = try await options.run { context in
                    try await PostgresOutbox(pool: context.pool).rotateKey(from: old, to: new)
                }
                let unopened =
                    rotation.unopened == 0 ? "" : "; \(rotation.unopened) sealed under neither key stay as they were"
                try options.output.print(
                    rotation,
                    "Re-sealed \(rotation.webhookSecrets) webhook secrets and \(rotation.invitationLinks) invitation "
                        + "links under the new key\(unopened). Restart workers with it.")
            }
        }
    }
}
