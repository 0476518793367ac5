import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a user from a couple.",
            discussion: "Example: rbac revoke --couple C --user pia@example.com")
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await member.run(acting) { context, actor, user, couple in
                let removed = try await context.memberships.remove(user.id, from: couple, as: actor)
                try acting.output.print(
                    removed,
                    "Removed \(user.email) (\(removed.role)) from couple \(removed.coupleID.uuidString.lowercased())")
            }
        }
    }
}
