import ArgumentParser
import Collaboration
import Foundation

/// The options every membership command shares: which couple, which user.
struct MemberOptions: ParsableArguments {
    @Option(help: "The couple's id.") var couple: String
    @Option(help: "The user's id or email address.") var user: String

    func validate() throws {
        _ = try Parse.couple(couple)
        try Parse.user(user)
    }
}

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

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a couple's members.")
        @Option(help: "The couple's id.") var couple: String
        @OptionGroup var page: PageOptions
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws { _ = try Parse.couple(couple) }

        func run() async throws {
            try await CommandContext.run(database) { context in
                let (coupleID, acting) = (try Parse.couple(couple), try await context.actor(actor))
                let members = try await page.read(id: \.user.id) {
                    try await context.memberships.members(of: coupleID, as: acting)
                } page: { limit, after in
                    try await context.memberships.members(of: coupleID, limit: limit, after: after, as: acting)
                }
                try output.print(members, memberTable(members))
            }
        }
    }

    struct TransferOwnership: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "transfer-ownership",
            abstract: "Make a member the owner; the previous owner becomes a partner.")
        @Option(help: "The couple's id.") var couple: String
        @Option(help: "The new owner's id or email address.") var to: String
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            _ = try Parse.couple(couple)
            try Parse.user(to)
        }

        func run() async throws {
            try await CommandContext.run(database) { context in
                let newOwner = try await context.user(to)
                let membership = try await context.memberships.transferOwnership(
                    of: try Parse.couple(couple), to: newOwner.id, as: try await context.actor(actor))
                try output.print(
                    membership, "\(newOwner.email) now owns couple \(membership.coupleID.uuidString.lowercased())")
            }
        }
    }

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

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "May a user do something in a couple? Exit 0 when allowed, 1 when denied.")
        @OptionGroup var member: MemberOptions
        @Option(help: "The permission, e.g. budget.edit (see rbac roles).") var permission: String
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            guard Permission(rawValue: permission) != nil else {
                throw ValidationError("\(quoted(permission)) is not a permission (area.action, e.g. budget.edit)")
            }
        }

        func run() async throws {
            let allowed = try await CommandContext.run(database) { context in
                let user = try await context.user(member.user)
                let answer = try await context.permissions.check(
                    Permission(rawValue: permission)!, user: user.id, couple: try Parse.couple(member.couple))
                if output.json {
                    try printJSON(answer)
                } else {
                    print(answer.allowed ? "allowed" : "denied")
                }
                return answer.allowed
            }
            if !allowed { throw ExitCode(ExitStatus.denied.rawValue) }
        }
    }

    struct Roles: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The access policy: roles, their permissions and what they may give.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await CommandContext.run(database) { context in
                let roles = try await context.permissions.roles()
                try output.print(
                    roles,
                    Table(
                        headers: ["ROLE", "MAY GIVE", "PERMISSIONS"],
                        rows: roles.map {
                            [
                                $0.name.rawValue, $0.grants.map(\.rawValue).joined(separator: ","),
                                $0.permissions.map(\.rawValue).joined(separator: " "),
                            ]
                        }
                    ).rendered)
            }
        }
    }
}
