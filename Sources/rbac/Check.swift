import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "May a user do something in a couple? Exit 0 when allowed, 1 when denied.",
            discussion: """
                With --explain it says why: the role the user holds and whether it grants the permission (and \
                which roles do), or that their membership is suspended, expired or missing.

                Example: rbac check --couple C --user pia@example.com --permission budget.edit --explain
                """)
        @OptionGroup var member: MemberOptions
        @Option(help: "The permission, e.g. budget.edit (see rbac roles).") var permission: String
        @Flag(help: "Say why the answer is what it is.") var explain = false
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws { try Parse.name(permission, as: Permission.self) }

        func run() async throws {
            let allowed = try await CommandContext.run(database) { context in
                let user = try await context.user(member.user)
                let couple = try Parse.couple(member.couple)
                let permission: Permission = try Parse.name(permission)
                guard explain else {
                    let answer = try await context.permissions.check(permission, user: user.id, couple: couple)
                    if output.json { try printJSON(answer) } else { print(answer.allowed ? "allowed" : "denied") }
                    return answer.allowed
                }
                let explained = try await Self.explain(permission, user: user, couple: couple, context)
                if output.json {
                    try printJSON(explained)
                } else {
                    print("\(explained.allowed ? "allowed" : "denied"): \(explained.reason)")
                }
                return explained.allowed
            }
            if !allowed { throw ExitCode(ExitStatus.denied.rawValue) }
        }

        struct Explained: Encodable {
            let allowed: Bool
            let revision: Int64?
            let reason: String
        }

        /// The answer and its reason, read from the user's permission set (what checks read, in one snapshot);
        /// when it holds no role, the couple's members say why.
        static func explain(_ permission: Permission, user: User, couple: UUID, _ context: CommandContext)
            async throws -> Explained
        {
            let set = try await context.repository.permissionSet(couple: couple, user: user.id)
            guard let revision = set.revision else {
                return Explained(allowed: false, revision: nil, reason: "couple \(idText(couple)) does not exist")
            }
            let allowed = set.permissions.contains(permission)
            let actor = Actor.operator(label: CommandContext.osUser())
            let granting = try await context.repository.roles(couple: couple, as: actor)
                .filter { $0.permissions.contains(permission) }.map(\.name.rawValue)
            let others =
                granting.isEmpty
                ? "no role grants it" : "\(granting.joined(separator: ", ")) \(granting.count == 1 ? "does" : "do")"
            let reason: String
            if let role = set.role {
                reason =
                    allowed
                    ? "\(user.email) holds role \(role) in the couple, which grants \(permission)"
                    : "\(user.email) holds role \(role) in the couple, which does not grant \(permission); \(others)"
            } else {
                let members = try await context.repository.coupleDetail(couple, as: actor).members
                switch members.first(where: { $0.user.id == user.id }) {
                case nil:
                    reason = "\(user.email) is not a member of the couple; \(others)"
                case let member? where member.status == .suspended:
                    reason =
                        "\(user.email) holds role \(member.role) in the couple, suspended: rbac reactivate restores it"
                case let member? where member.status == .expired:
                    reason =
                        "\(user.email) held role \(member.role) in the couple until \(member.expiresAt?.iso8601 ?? "") "
                        + "(rbac grant renews it)"
                case .some:
                    reason = "\(user.email) was not an active member when asked, and is now: ask again"
                }
            }
            return Explained(allowed: allowed, revision: revision, reason: reason)
        }
    }
}
