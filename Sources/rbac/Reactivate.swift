import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Reactivate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Reactivate a suspended member: their role grants again.",
            discussion: """
                Needs what suspending needs: collaborators.manage and a role that may give the member's.

                Example: rbac reactivate --couple C --user planner@example.com
                """)
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await member.run(acting) { context, actor, user, couple in
                let active = try await context.memberships.reactivate(user.id, in: couple, as: actor)
                try acting.output.print(
                    active,
                    "Reactivated \(user.email) (\(active.role)) in couple \(active.coupleID.uuidString.lowercased())")
            }
        }
    }
}
