import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A member leaves a couple (the last active owner cannot).",
            discussion: "Example: rbac leave --couple C --user pia@example.com")
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await member.run(acting) { context, actor, user, couple in
                let left = try await context.memberships.leave(couple, user: user.id, as: actor)
                try acting.output.print(left, "\(user.email) left couple \(left.coupleID.uuidString.lowercased())")
            }
        }
    }
}
