import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A member leaves a couple (the last active owner cannot).")
        @OptionGroup var member: MemberOptions
        @OptionGroup var acting: ActingOptions

        func run() async throws {
            try await acting.run { context, actor in
                let user = try await context.user(member.user)
                let left = try await context.memberships.leave(
                    try Parse.couple(member.couple), user: user.id, as: actor)
                try acting.output.print(left, "\(user.email) left couple \(left.coupleID.uuidString.lowercased())")
            }
        }
    }
}
