import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user from a couple.")
        @OptionGroup var member: MemberOptions
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await CommandContext.run(database) { context in
                let user = try await context.user(member.user)
                let removed = try await context.memberships.remove(
                    user.id, from: try Parse.couple(member.couple), as: try await context.actor(actor))
                try output.print(
                    removed,
                    "Removed \(user.email) (\(removed.role)) from couple \(removed.coupleID.uuidString.lowercased())")
            }
        }
    }
}
