import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC {
    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invite someone to a couple with a role; prints the link once.",
            discussion: """
                Links start with $RBAC_PUBLIC_URL (default http://localhost:8080).

                Example: rbac invite --couple C --role planner --email pia@example.com --access-expires 90d
                """)
        @Option(help: "The couple's id.") var couple: String
        @Option(help: "The role the invitee will get.") var role: String
        @Option(help: "Only the user with this email address may accept.") var email: String?
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "How long the link works: 30m, 12h, 7d (at most 365d).", valueName: "lifetime"))
        var expires: Lifetime = Lifetime(argument: "7d")!
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "The membership accepting creates expires this long after the invitation is made: 30m, 12h, 90d.",
                valueName: "lifetime"))
        var accessExpires: Lifetime?
        @Option(
            help: ArgumentHelp(
                "The membership accepting creates expires at this instant: 2027-09-30T18:00Z.", valueName: "instant"))
        var accessUntil: Instant?
        @OptionGroup var acting: ActingOptions

        private var membershipExpiresAt: Date? {
            get throws {
                try membershipExpiry(
                    after: accessExpires, until: accessUntil, flags: ("--access-expires", "--access-until"))
            }
        }

        func validate() throws {
            _ = try Parse.couple(couple)
            try Parse.name(role, as: RoleName.self)
            _ = try membershipExpiresAt
            if let email { try Parse.email(email) }
        }

        func run() async throws {
            try await acting.run { context, actor in
                let issued = try await context.invitations.invite(
                    to: try Parse.couple(couple), role: try Parse.name(role),
                    email: email.flatMap(EmailAddress.init(rawValue:)), expiresIn: expires.duration,
                    membershipExpiresAt: try membershipExpiresAt, as: actor)
                try printIssued(issued, json: acting.output.json)
            }
        }
    }
}
