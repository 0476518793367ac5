import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a user a role in a couple (adds them, or changes the role they hold).")
        @OptionGroup var member: MemberOptions
        @Option(help: "The role, e.g. owner, partner, planner, viewer (see rbac roles).") var role: String
        @OptionGroup var acting: ActingOptions

        func validate() throws { try Parse.role(role) }

        func run() async throws {
            try await member.run(acting) { context, actor, user, couple in
                let membership = try await context.memberships.grant(
                    try RoleName(validating: role), to: user.id, in: couple, as: actor)
                try acting.output.print(
                    membership,
                    "\(user.email) is now \(membership.role) in couple \(membership.coupleID.uuidString.lowercased())")
            }
        }
    }
}
