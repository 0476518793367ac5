import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a couple's members.", discussion: "Example: rbac members --couple C --limit 50")
        @Option(help: "The couple's id.") var couple: String
        @OptionGroup var page: PageOptions<Date>
        @OptionGroup var acting: ActingOptions

        func validate() throws { _ = try Parse.couple(couple) }

        func run() async throws {
            try await acting.run { context, actor in
                let coupleID = try Parse.couple(couple)
                try await page.print(acting.output, memberColumns) { limit, after in
                    try await context.memberships.members(of: coupleID, limit: limit, after: after, as: actor)
                }
            }
        }
    }
}
