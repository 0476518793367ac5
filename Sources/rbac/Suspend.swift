import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Suspend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Suspend a member: they keep their role, which grants nothing until reactivated.",
            discussion: """
                Needs collaborators.manage and a role that may give the member's (a partner cannot suspend an \
                owner); the last active owner cannot be suspended. The invitations they made let no one in until \
                they are reactivated.

                Example: rbac suspend --couple C --user planner@example.com
                """)
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await member.change(acting) { context, actor, user, couple in
                try await context.memberships.suspend(user, in: couple, as: actor)
            } message: {
                "Suspended \($0.email) (\($1.role)) in couple \(idText($1.coupleID))"
            }
        }
    }
}
