import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a user from a couple.",
            discussion: """
                The pending invitations they made are revoked with them: each was made on their authority.

                Example: rbac revoke --couple C --user pia@example.com
                """)
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await member.change(acting) { context, actor, user, couple in
                try await context.memberships.remove(user, from: couple, as: actor)
            } message: {
                "Removed \($0.email) (\($1.role)) from couple \(idText($1.coupleID))"
            }
        }
    }
}
