import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a user a role in a couple (adds them, or changes the role they hold).",
            discussion: """
                The membership holds until changed, or until --expires / --until: from that instant it grants \
                nothing. Granting again without either removes an expiry. An owner's membership never expires.

                The user must exist already: add them with rbac users add, or invite them with rbac invite.

                Example: rbac grant --couple C --user planner@example.com --role planner --expires 90d
                """)
        @OptionGroup var member: MemberOptions
        @Option(help: "The role: one of the policy's or the couple's own (see rbac roles --couple C).")
        var role: String
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("The membership expires this long from now: 30m, 12h, 90d.", valueName: "lifetime"))
        var expires: Lifetime?
        @Option(help: ArgumentHelp("The membership expires at this instant: 2027-09-30T18:00Z.", valueName: "instant"))
        var until: Instant?
        @OptionGroup var acting: ActingOptions

        func validate() throws {
            try Parse.name(role, as: RoleName.self)
            _ = try membershipExpiry(after: expires, until: until, flags: ("--expires", "--until"))
        }

        func run() async throws {
            let unknownAddress = { (context: CommandContext, actor: Actor, address: EmailAddress) in
                // An unknown role is named now rather than by the invitation suggested. The couple's roles are
                // read as the actor: one who may not see them gets the suggestion unchecked, as before.
                if let roles = try? await context.permissions.roles(of: try Parse.couple(member.couple), as: actor),
                    !roles.contains(where: { $0.name.rawValue == role })
                {
                    throw CollaborationError.unknownRole(role, valid: roles.map(\.name))
                }
                return "add them with `rbac users add --email \(address)`, or invite them with "
                    + "`rbac invite --couple \(member.couple) --email \(address) --role \(role)`"
            }
            try await member.change(acting, unknownAddress: unknownAddress) { context, actor, user, couple in
                try await context.memberships.grant(
                    try Parse.name(role), to: user, in: couple,
                    until: try membershipExpiry(after: expires, until: until, flags: ("--expires", "--until")),
                    as: actor)
            } message: { user, membership in
                let until = membership.expiresAt.map { " until \($0.iso8601)" } ?? ""
                return "\(user.email) is now \(membership.role) in couple \(idText(membership.coupleID))\(until)"
            }
        }
    }
}
