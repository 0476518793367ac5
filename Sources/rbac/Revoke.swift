import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user from a couple.")
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await acting.run { context, actor in
                let user = try await context.user(member.user)
                let removed = try await context.memberships.remove(
                    user.id, from: try Parse.couple(member.couple), as: actor)
                try acting.output.print(
                    removed,
                    "Removed \(user.email) (\(removed.role)) from couple \(removed.coupleID.uuidString.lowercased())")
            }
        }
    }
}
