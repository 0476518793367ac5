import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A member leaves a couple (the last active owner cannot).",
            discussion: """
                The pending invitations they made are revoked: each was made on their authority.

                Example: rbac leave --couple C --user pia@example.com
                """)
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await member.change(acting) { context, actor, user, couple in
                try await context.memberships.leave(couple, user: user, as: actor)
            } message: {
                "\($0.email) left couple \(idText($1.coupleID))"
            }
        }
    }
}
