import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add and list users, and their identities at identity providers.",
            discussion: """
                Users are also made on their first sign-in with a provider's token. Example: rbac users add \
                --email paul@example.com --name Paul --identity https://tenant.eu.auth0.com/ "auth0|64f1c0ffee"
                """,
            subcommands: [Add.self, List.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add a user.")
            @Option(help: "Email address (unique, whatever its case).") var email: String
            @Option(help: "Display name.") var name: String?
            @Option(
                parsing: .upToNextOption,
                help: ArgumentHelp(
                    "The user's account at an identity provider: its issuer (the tokens' iss) and subject (sub).",
                    valueName: "issuer subject"))
            var identity: [String] = []
            @OptionGroup var options: OperatorOptions

            func validate() throws {
                try Parse.email(email)
                guard identity.isEmpty || identity.count == 2 else {
                    throw ValidationError("--identity takes two values, the issuer and the subject")
                }
                do {
                    _ = try name.map(User.validateDisplayName)
                    if identity.count == 2 { try ExternalIdentity.validate(issuer: identity[0], subject: identity[1]) }
                } catch { throw ValidationError(error.message) }
            }

            func run() async throws {
                try await options.run { context in
                    let user = try await context.repository.addUser(
                        email: EmailAddress(rawValue: email)!, displayName: try name.map(User.validateDisplayName),
                        identity: identity.count == 2 ? UserIdentity(issuer: identity[0], subject: identity[1]) : nil)
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
                    let users = try await page.read(id: \.id, pages: context.repository.users(limit:after:))
                    try output.print(
                        users,
                        Table(
                            headers: ["ID", "EMAIL", "NAME", "IDENTITIES"],
                            rows: users.map {
                                [
                                    $0.id.uuidString.lowercased(), $0.email, $0.displayName ?? "",
                                    $0.identities.map { "\($0.issuer) \($0.subject)" }.joined(separator: ", "),
                                ]
                            }
                        ).rendered)
                }
            }
        }
    }
}
