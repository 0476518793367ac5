import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "May a user do something in a couple? Exit 0 when allowed, 1 when denied.",
            discussion: "Example: rbac check --couple C --user pia@example.com --permission budget.edit")
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
}
