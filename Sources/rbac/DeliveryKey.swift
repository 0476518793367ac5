import ArgumentParser
import Collaboration
import Foundation
import Storage

extension RBAC {
    struct DeliveryKeyCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delivery-key",
            abstract:
                "Check the delivery key against the database's, move the database to a new one, or replace a lost one.",
            discussion: """
                The database holds webhook secrets and invitation links sealed under one delivery key, which it \
                never sees; a check sealed under it tells that key from any other. A worker (rbac serve, rbac \
                deliver) holding another key sends nothing and says so, leaving every message for a worker with \
                the database's key, and commands that seal refuse it (exit 4).

                Example: rbac delivery-key check --delivery-key-file /etc/rbac/delivery.key
                """,
            subcommands: [Check.self, Rotate.self, Reset.self])

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
                let old = try DeliveryKeyOptions.key(file: oldKeyFile)
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

        struct Reset: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Replace a delivery key that is lost: new webhook secrets, waiting links given up.",
                discussion: """
                    For when no one holds the database's key any more, so that rotate cannot open what it \
                    sealed. The new key (--delivery-key-file, or RBAC_DELIVERY_KEY) becomes the database's, in \
                    one transaction; what the old one sealed is gone for good: every webhook endpoint gets a new \
                    secret, printed once, to be given to its receiver (deliveries are signed with it from now \
                    on); invitation emails still waiting die, to be invited again; waiting webhooks go without \
                    the invitation link they were to carry. There is no undo, so it takes --yes. A key that is \
                    the database's already is refused (exit 4), changing nothing, and so is a reset while a \
                    worker is sending under the database's key, which is then not lost (exit 4, until its lease \
                    ends).

                    Example: rbac delivery-key reset --delivery-key-file new.key --yes
                    """)
            @Flag(help: "Reset; there is no undo.") var yes = false
            @OptionGroup var key: DeliveryKeyOptions
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                guard yes else {
                    throw ValidationError(
                        "a reset gives every webhook a new secret and gives up waiting invitation links; add --yes")
                }
            }

            func run() async throws {
                let new = try key.required()
                let reset = try await options.run { context in
                    try await PostgresOutbox(pool: context.pool).resetKey(to: new)
                }
                let secrets = reset.webhooks.map { "\(idText($0.id)) \($0.url)\n\($0.secret)" }
                try options.output.print(
                    reset,
                    (["The new key is the database's. New webhook secrets, shown once: give each to its receiver."]
                        + secrets
                        + [
                            "\(reset.invitationEmails) waiting invitation emails died (invite again); "
                                + "\(reset.invitationLinks) waiting webhooks go without their invitation link. "
                                + "Restart workers with the new key."
                        ]).joined(separator: "\n"))
            }
        }
    }
}
