import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add and list users.", discussion: "Example: rbac users add --email paul@example.com --name Paul",
            subcommands: [Add.self, List.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add a user.")
            @Option(help: "Email address (unique, whatever its case).") var email: String
            @Option(help: "Display name.") var name: String?
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                guard EmailAddress(rawValue: email) != nil else {
                    throw ValidationError("\(quoted(email)) is not an email address")
                }
                do { _ = try name.map(User.validateDisplayName) } catch { throw ValidationError(error.message) }
            }

            func run() async throws {
                try await options.run { context in
                    let user = try await context.repository.addUser(
                        email: EmailAddress(rawValue: email)!, displayName: try name.map(User.validateDisplayName))
                    try options.output.print(user, "Added user \(user.email) \(user.id.uuidString.lowercased())")
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List users by email.")
            @OptionGroup var page: PageOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let read = context.repository.users(limit:after:)
                    let users = try await page.read(
                        id: \.id, every: { try await everyPage(id: \.id, read) }, page: read)
                    try output.print(
                        users,
                        Table(
                            headers: ["ID", "EMAIL", "NAME"],
                            rows: users.map { [$0.id.uuidString.lowercased(), $0.email, $0.displayName ?? ""] }
                        ).rendered)
                }
            }
        }
    }
}
