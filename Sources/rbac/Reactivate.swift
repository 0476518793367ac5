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
            try await member.change(acting) { context, actor, user, couple in
                try await context.memberships.reactivate(user, in: couple, as: actor)
            } message: {
                "Reactivated \($0.email) (\($1.role)) in couple \(idText($1.coupleID))"
            }
        }
    }
}
