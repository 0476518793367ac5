import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Couples: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create, list, show, change, rename and delete couples; limit how many a user creates.",
            discussion: "Example: rbac couples create --name \"Olivia & Paul\" --owner-email olivia@example.com",
            subcommands: [Create.self, List.self, Show.self, Set.self, Rename.self, Delete.self, Limit.self])

        struct Limit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A user creates couples only while owning fewer than this; with --per-user, set it.",
                discussion: """
                    A user who owns that many is refused another of their own making (exit 4, HTTP 409, \
                    quota_exceeded) and nothing is written; the operator's creations are not held to it.

                    Example: rbac couples limit --per-user 5
                    """)
            @Option(parsing: .unconditional, help: ArgumentHelp("The new limit, 1 to 100000.", valueName: "n"))
            var perUser: Int?
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                if let perUser, !(1...100_000).contains(perUser) {
                    throw ValidationError("--per-user must be from 1 to 100000, not \(perUser)")
                }
            }

            func run() async throws {
                try await options.run { context in
                    let limit = try await context.repository.coupleLimit(set: perUser)
                    try options.output.print(
                        ["per_user": limit], "A user may create couples while owning fewer than \(limit).")
                }
            }
        }

        struct Rename: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Rename a couple (with --actor, they need couple.edit).",
                discussion: "Example: rbac couples rename C --name \"Olivia & Paul Smith\"")
            @Argument(help: "The couple's id.") var couple: String
            @Option(help: "The new name.") var name: String
            @OptionGroup var acting: ActingOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                do { _ = try Couple.validateName(name) } catch { throw ValidationError(error.message) }
            }

            func run() async throws {
                try await acting.run { context, actor in
                    let renamed = try await context.memberships.renameCouple(
                        try Parse.couple(couple), to: name, as: actor)
                    try acting.output.print(
                        renamed, "Renamed couple \(idText(renamed.id)) to \(quoted(renamed.name))")
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "Delete a couple with its members, invitations, roles and budget (with --actor, they need couple.delete).",
                discussion: """
                    Its audit log stays and records the deletion. There is no undo, so it takes --yes.
                    Example: rbac couples delete C --yes
                    """)
            @Argument(help: "The couple's id.") var couple: String
            @Flag(help: "Delete it; there is no undo.") var yes = false
            @OptionGroup var acting: ActingOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                guard yes else { throw ValidationError("deleting a couple cannot be undone; add --yes to delete it") }
            }

            func run() async throws {
                try await acting.run { context, actor in
                    let id = try Parse.couple(couple)
                    try await context.memberships.deleteCouple(id, as: actor)
                    try acting.output.print(
                        ["deleted": idText(id)], "Deleted couple \(idText(id))")
                }
            }
        }

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change a couple's settings: the email domains it may invite (the operator's).",
                discussion: "Example: rbac couples set C --invite-domains example.com,example.org")
            @Argument(help: "The couple's id.") var couple: String
            @Option(
                help: ArgumentHelp(
                    "The only domains its invitations may name, each exactly (a subdomain is another; at most "
                        + "100): repeat, or separate with commas; \"\" alone for any.",
                    valueName: "domains"))
            var inviteDomains: [String]
            @OptionGroup var options: OperatorOptions

            /// Repeated and comma-separated alike, as the other lists of the CLI repeat: with one value taken, the
            /// last, a second `--invite-domains` would drop the first's domains. No domains for `""` alone. An empty
            /// entry is refused rather than dropped: `","` would otherwise allow any address, the opposite of what
            /// was meant.
            private var domains: [String] {
                get throws {
                    guard !inviteDomains.allSatisfy({ $0.allSatisfy(\.isWhitespace) }) else { return [] }
                    let domains = inviteDomains.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
                        .map { $0.trimmingCharacters(in: .whitespaces) }
                    guard !domains.contains(where: \.isEmpty) else {
                        throw ValidationError(
                            "--invite-domains has an empty entry; give \"\" alone to allow any domain")
                    }
                    return domains
                }
            }

            func validate() throws {
                _ = try Parse.couple(couple)
                _ = try domains
            }

            func run() async throws {
                let domains = try domains
                try await options.run { context in
                    let set = try await context.repository.setInviteDomains(
                        couple: try Parse.couple(couple), domains: domains)
                    struct Settings: Encodable { let inviteDomains: [String] }
                    try options.output.print(Settings(inviteDomains: set), Couples.inviting(set) + ".")
                }
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create a couple with its first owner (created when the email is new).",
                discussion: "Example: rbac couples create --name \"Olivia & Paul\" --owner-email olivia@example.com")

            @Option(help: "The couple's name.") var name: String
            @Option(help: "The owner's email address.") var ownerEmail: String
            @Option(help: "The owner's display name, when the user is new.") var ownerName: String?
            @OptionGroup var acting: ActingOptions

            func validate() throws {
                try Parse.email(ownerEmail)
                do {
                    _ = try Couple.validateName(name)
                    _ = try ownerName.map(User.validateDisplayName)
                } catch { throw ValidationError(error.message) }
            }

            func run() async throws {
                // The owner it may add is recorded under the operator's label, as is the couple without --actor;
                // an unknown --actor is refused before the owner is added.
                try await acting.run { context, actor in
                    let email = EmailAddress(rawValue: ownerEmail)!
                    let owner: User
                    do {
                        owner = try await context.repository.user(.email(email))
                    } catch let error as CollaborationError where error.code == .notFound {
                        owner = try await context.repository.addUser(
                            email: email, displayName: try ownerName.map(User.validateDisplayName))
                    }
                    let couple = try await context.repository.createCouple(
                        name: name, owner: owner.id, as: actor)
                    try acting.output.print(
                        CoupleReport(couple: couple, owner: owner),
                        "Created couple \(quoted(couple.name)) \(idText(couple.id)) owned by \(owner.email)"
                    )
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List couples (oldest first).", discussion: "Example: rbac couples list --limit 50 --json")
            @OptionGroup var page: PageOptions<Date>
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let columns = Columns<Couple>(headers: ["ID", "NAME", "CREATED", "REVISION"]) {
                        [idText($0.id), $0.name, $0.createdAt.iso8601, String($0.revision)]
                    }
                    try await page.print(
                        output, columns, pages: context.repository.couples(limit:after:))
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Show a couple and its members.", discussion: "Example: rbac couples show C")
            @Argument(help: "The couple's id.") var couple: String
            @OptionGroup var acting: ActingOptions

            func validate() throws { _ = try Parse.couple(couple) }

            func run() async throws {
                try await acting.run { context, actor in
                    let id = try Parse.couple(couple)
                    let detail = try await context.memberships.couple(id, as: actor)
                    let found = detail.couple
                    try acting.output.print(
                        detail,
                        "\(found.name)  \(idText(found.id))  created \(found.createdAt.iso8601)  revision \(found.revision)\n"
                            + "\(Couples.inviting(detail.inviteDomains)) (rbac couples set)\n"
                            + memberColumns.table(detail.members).rendered)
                }
            }
        }
    }
}

struct CoupleReport: Encodable {
    let couple: Couple
    let owner: User
}

extension RBAC.Couples {
    /// Whom a couple's invitations may name, for people: "Invitations may name any address". A domain stored in
    /// ASCII spelling is shown after the letters it stands for, as people type it:
    /// `bücher.example (xn--bcher-kva.example)`.
    static func inviting(_ domains: [String]) -> String {
        let shown = domains.map { domain in
            let letters = IDNA.inLetters(domain)
            return letters == domain ? domain : "\(visible(letters)) (\(domain))"
        }
        return shown.isEmpty
            ? "Invitations may name any address"
            : "Invitations may name addresses at \(shown.joined(separator: ", ")) only"
    }
}

let memberColumns = Columns<Member>(headers: ["USER", "EMAIL", "NAME", "ROLE", "STATUS", "JOINED", "EXPIRES"]) {
    [
        idText($0.user.id), $0.user.email, $0.user.displayName ?? "", $0.role.rawValue,
        $0.status.rawValue, $0.joinedAt.iso8601, $0.expiresAt?.iso8601 ?? "",
    ]
}
