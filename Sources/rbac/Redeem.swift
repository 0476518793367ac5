import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC {
    struct Redeem: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept an invitation token for a user.",
            discussion: "Example: printf '%s\\n' \"$LINK\" | rbac redeem - --user paul@example.com")
        @Argument(
            help: """
                The token (inv_...) or the whole link; - reads it from standard input, which keeps it out of the \
                process list and the shell's history.
                """)
        var token: String
        @Option(help: "The user who accepts (id or email).") var user: String
        @OptionGroup var options: OperatorOptions

        func validate() throws {
            if token != "-" { _ = try Parse.invitationToken(token) }
            try Parse.user(user)
        }

        func run() async throws {
            let token = try Parse.invitationToken(
                self.token == "-" ? (readLine() ?? "").trimmingCharacters(in: .whitespaces) : self.token)
            try await options.run { context in
                let accepter = try await context.user(user)
                let membership = try await context.invitations.accept(
                    token: token.rawValue, user: accepter.id, as: .operator(label: options.label.recorded))
                try options.output.print(
                    membership,
                    "\(accepter.email) joined couple \(idText(membership.coupleID)) as \(membership.role)"
                )
            }
        }
    }
}
