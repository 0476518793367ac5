import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
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
}
