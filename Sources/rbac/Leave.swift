import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A member leaves a couple (the last active owner cannot).")
        @OptionGroup var member: MemberOptions
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await CommandContext.run(database) { context in
                let user = try await context.user(member.user)
                let left = try await context.memberships.leave(
                    try Parse.couple(member.couple), user: user.id, as: try await context.actor(actor))
                try output.print(left, "\(user.email) left couple \(left.coupleID.uuidString.lowercased())")
            }
        }
    }
}
