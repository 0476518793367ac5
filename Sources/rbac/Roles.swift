import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
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
