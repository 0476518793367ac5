import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a user a role in a couple (adds them, or changes the role they hold).")
        @OptionGroup var member: MemberOptions
        @Option(help: "The role, e.g. owner, partner, planner, viewer (see rbac roles).") var role: String
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws { try Parse.role(role) }

        func run() async throws {
            try await CommandContext.run(database) { context in
                let user = try await context.user(member.user)
                let membership = try await context.memberships.grant(
                    try RoleName(validating: role), to: user.id, in: try Parse.couple(member.couple),
                    as: try await context.actor(actor))
                try output.print(
                    membership,
                    "\(user.email) is now \(membership.role) in couple \(membership.coupleID.uuidString.lowercased())")
            }
        }
    }
}
