import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add, list, show, edit and delete users, and their identities at identity providers.",
            discussion: """
                Users are also made on their first sign-in with a provider's token. Example: rbac users add \
                --email paul@example.com --name Paul --identity https://tenant.eu.auth0.com/ "auth0|64f1c0ffee"
                """,
            subcommands: [Add.self, List.self, Show.self, Edit.self, Delete.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a user.", discussion: "Example: rbac users add --email pia@example.com --name Pia")
            @Option(help: "Email address (unique, whatever its case).") var email: String
            @Option(help: "Display name.") var name: String?
            @Option(
                parsing: .upToNextOption,
                help: ArgumentHelp(
                    "The user's account at an identity provider: its issuer (the tokens' iss) and subject (sub).",
                    valueName: "issuer subject"))
            var identity: [String] = []
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                try Parse.email(email)
                guard identity.isEmpty || identity.count == 2 else {
                    throw ValidationError("--identity takes two values, the issuer and the subject")
                }
                do {
                    _ = try name.map(User.validateDisplayName)
                    if identity.count == 2 { try ExternalIdentity.validate(issuer: identity[0], subject: identity[1]) }
                } catch { throw ValidationError(error.message) }
            }

            func run() async throws {
                try await options.run { context in
                    let user = try await context.repository.addUser(
                        email: EmailAddress(rawValue: email)!, displayName: try name.map(User.validateDisplayName),
                        identity: identity.count == 2 ? UserIdentity(issuer: identity[0], subject: identity[1]) : nil)
                    try options.output.print(user, "Added user \(user.email) \(idText(user.id))")
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Show a user, their identities and the couples they belong to.",
                discussion: "Example: rbac users show pia@example.com")
            @Argument(help: "The user's id or email address.") var user: String
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws { try Parse.user(user) }

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let found = try await context.user(user)
                    let couples = try await everyPage(id: \.cursor) { limit, after in
                        try await context.repository.userCouples(
                            found.id, limit: limit, after: after, as: .operator(label: CommandContext.osUser()))
                    }
                    struct Shown: Encodable {
                        let user: User
                        let couples: [UserCouple]
                    }
                    let identities = found.identities.map { "\($0.issuer) \($0.subject)" }
                    try output.print(
                        Shown(user: found, couples: couples),
                        [found.email, found.displayName ?? "", idText(found.id)].filter { !$0.isEmpty }
                            .joined(separator: "  ") + "\n"
                            + (identities.isEmpty ? "" : "Identities: \(identities.joined(separator: ", "))\n")
                            + Table(
                                headers: ["COUPLE", "NAME", "ROLE", "STATUS", "EXPIRES"],
                                rows: couples.map {
                                    [
                                        idText($0.coupleID), $0.coupleName, $0.role.rawValue,
                                        $0.status.rawValue, $0.expiresAt?.iso8601 ?? "",
                                    ]
                                }
                            ).rendered)
                }
            }
        }

        struct Edit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change a user's email address, display name or identities at providers.",
                discussion: """
                    A change to what is there writes nothing. Their identities at providers keep the addresses the \
                    providers gave, and an invitation bound to their old address is no longer theirs to accept.

                    An identity linked signs in as them from then on: a new account of theirs, or one at a provider \
                    that does not verify their address. One unlinked finds them no more, unless its provider \
                    verifies their address, which links it again at its next sign-in.

                    Example: rbac users edit pia@example.com --email pia.berg@example.com --name "Pia Berg"
                    """)
            @Argument(help: "The user's id or email address.") var user: String
            @Option(help: "The new email address (unique, whatever its case).") var email: String?
            @Option(help: "The new display name.") var name: String?
            @Flag(help: "Remove the display name.") var noName = false
            @Option(
                parsing: .upToNextOption,
                help: ArgumentHelp("Link this account at an identity provider to them.", valueName: "issuer subject"))
            var identity: [String] = []
            @Option(
                parsing: .upToNextOption,
                help: ArgumentHelp("Unlink this identity of theirs.", valueName: "issuer subject"))
            var removeIdentity: [String] = []
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                try Parse.user(user)
                guard email != nil || name != nil || noName || !identity.isEmpty || !removeIdentity.isEmpty else {
                    throw ValidationError(
                        "give what to change: --email, --name, --no-name, --identity or --remove-identity")
                }
                guard !(noName && name != nil) else { throw ValidationError("--name and --no-name cannot go together") }
                if let email { try Parse.email(email) }
                let linked = try edit(email: nil, name: nil).linkIdentity
                do {
                    _ = try name.map(User.validateDisplayName)
                    if let linked { try ExternalIdentity.validate(issuer: linked.issuer, subject: linked.subject) }
                } catch { throw ValidationError(error.message) }
            }

            /// The change, with `email` and `name` as parsed.
            private func edit(email: EmailAddress?, name: String?) throws -> UserEdit {
                func parsed(_ values: [String], _ flag: String) throws -> UserIdentity? {
                    guard !values.isEmpty else { return nil }
                    guard values.count == 2 else {
                        throw ValidationError("\(flag) takes two values, the issuer and the subject")
                    }
                    return UserIdentity(issuer: values[0], subject: values[1])
                }
                return UserEdit(
                    email: email, displayName: change(name, clear: noName),
                    linkIdentity: try parsed(identity, "--identity"),
                    unlinkIdentity: try parsed(removeIdentity, "--remove-identity"))
            }

            func run() async throws {
                try await options.run { context in
                    let found = try await context.user(user)
                    let edit = try edit(
                        email: email.map { EmailAddress(rawValue: $0)! }, name: try name.map(User.validateDisplayName))
                    let edited = try await context.memberships.editUser(
                        found.id, edit, as: .operator(label: options.label.recorded))
                    try options.output.print(
                        edited, "Edited user \(edited.email) \(idText(edited.id))")
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Delete a user, with their memberships and identities (the operator's).",
                discussion: """
                    Each couple's log records the removal, and the pending invitations they made are revoked. The \
                    logs keep the user's id, not their address or name: the operator's log is erased of them. \
                    Refused (exit 4) while they are a couple's last active owner: transfer its ownership or delete \
                    it first. There is no undo, so it takes --yes.

                    Example: rbac users delete pia@example.com --yes
                    """)
            @Argument(help: "The user's id or email address.") var user: String
            @Flag(help: "Delete them; there is no undo.") var yes = false
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                try Parse.user(user)
                guard yes else { throw ValidationError("deleting a user cannot be undone; add --yes to delete them") }
            }

            func run() async throws {
                try await options.run { context in
                    let found = try await context.user(user)
                    try await context.memberships.deleteUser(found.id, as: .operator(label: options.label.recorded))
                    try options.output.print(
                        ["deleted": idText(found.id)],
                        "Deleted user \(found.email) \(idText(found.id))")
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List users by email.", discussion: "Example: rbac users list --search berg")
            @Option(
                help: ArgumentHelp(
                    "Only users whose address or display name contains this text (one or two characters: begins "
                        + "with it), whatever its case.",
                    valueName: "text"))
            var search: String?
            @OptionGroup var page: PageOptions<String>
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws {
                do { try User.validateSearch(search) } catch { throw ValidationError(error.message) }
            }

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let columns = Columns<User>(headers: ["ID", "EMAIL", "NAME", "IDENTITIES"]) {
                        [
                            idText($0.id), $0.email, $0.displayName ?? "",
                            $0.identities.map { "\($0.issuer) \($0.subject)" }.joined(separator: ", "),
                        ]
                    }
                    try await page.print(output, columns) { limit, after in
                        try await context.repository.users(matching: search, limit: limit, after: after)
                    }
                }
            }
        }
    }
}
