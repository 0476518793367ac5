import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC {
    struct Invitations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, revoke and resend a couple's invitations.",
            discussion: "Example: rbac invitations list --couple C --status pending",
            subcommands: [List.self, Revoke.self, Resend.self, Limit.self])

        struct Limit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "How many invitations a couple may make in an hour; with --per-hour, set it.",
                discussion: """
                    Past it, inviting is refused (exit 4, HTTP 429) and nothing is written.

                    Example: rbac invitations limit --per-hour 200
                    """)
            @Option(parsing: .unconditional, help: ArgumentHelp("The new limit, 1 to 100000.", valueName: "n"))
            var perHour: Int?
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                if let perHour, !(1...100_000).contains(perHour) {
                    throw ValidationError("--per-hour must be from 1 to 100000, not \(perHour)")
                }
            }

            func run() async throws {
                try await options.run { context in
                    let limit = try await context.repository.invitationLimit(set: perHour)
                    try options.output.print(["per_hour": limit], "At most \(limit) invitations a couple an hour.")
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List invitations with their status.",
                discussion: "Example: rbac invitations list --couple C --status pending")
            @Option(help: "The couple's id.") var couple: String
            @Option(help: "Only pending, accepted, revoked or expired ones.") var status: String?
            @OptionGroup var page: PageOptions<Date>
            @OptionGroup var acting: ActingOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                if let status, InvitationStatus(rawValue: status) == nil {
                    throw ValidationError(
                        "unknown status \(quoted(status)); valid: pending, accepted, revoked, expired")
                }
            }

            func run() async throws {
                try await acting.run { context, actor in
                    let coupleID = try Parse.couple(couple)
                    let only = status.flatMap(InvitationStatus.init(rawValue:))
                    let columns = Columns<Invitation>(headers: ["ID", "ROLE", "EMAIL", "FROM", "STATUS", "EXPIRES"]) {
                        [
                            idText($0.id), $0.role.rawValue, $0.email ?? "", $0.inviter,
                            $0.status.rawValue, $0.expiresAt.iso8601,
                        ]
                    }
                    try await page.print(acting.output, columns) { limit, after in
                        try await context.invitations.invitations(
                            of: coupleID, status: only, limit: limit, after: after, as: actor)
                    }
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Revoke a pending invitation.", discussion: "Example: rbac invitations revoke --couple C ID")
            @OptionGroup var which: InvitationOptions
            @OptionGroup var acting: ActingOptions

            func run() async throws {
                let (couple, invitation) = try which.ids()
                try await acting.run { context, actor in
                    try await context.invitations.revoke(invitation, in: couple, as: actor)
                    let id = idText(invitation)
                    try acting.output.print(["revoked": id], "Revoked invitation \(id)")
                }
            }
        }

        struct Resend: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Revoke an invitation and issue a new link for the same role and email.",
                discussion: "Example: rbac invitations resend --couple C ID --expires 14d")
            @OptionGroup var which: InvitationOptions
            @Option(
                parsing: .unconditional,
                help: ArgumentHelp("How long the new link works: 30m, 12h, 7d (at most 365d).", valueName: "lifetime"))
            var expires: Lifetime = Lifetime(argument: "7d")!
            @OptionGroup var acting: ActingOptions

            func run() async throws {
                let (couple, invitation) = try which.ids()
                try await acting.run { context, actor in
                    let issued = try await context.invitations.resend(
                        invitation, in: couple, expiresIn: expires.duration, as: actor)
                    try printIssued(issued, json: acting.output.json)
                }
            }
        }
    }
}

/// Which invitation a command acts on: the couple's id, and the invitation's.
struct InvitationOptions: ParsableArguments {
    @Option(help: "The couple's id.") var couple: String
    @Argument(help: "The invitation's id.") var invitation: String

    func validate() throws { _ = try ids() }

    func ids() throws -> (couple: UUID, invitation: UUID) {
        (try Parse.couple(couple), try Parse.id(invitation, "invitation"))
    }
}
