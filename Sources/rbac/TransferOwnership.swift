import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct TransferOwnership: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "transfer-ownership",
            abstract: "Make a member the owner; the previous owner becomes a partner.",
            discussion: "Example: rbac transfer-ownership --couple C --to paul@example.com")
        @Option(help: "The couple's id.") var couple: String
        @Option(help: "The new owner's id or email address.") var to: String
        @OptionGroup var acting: ActingOptions

        func validate() throws {
            _ = try Parse.couple(couple)
            try Parse.user(to)
        }

        func run() async throws {
            try await acting.run { context, actor in
                let newOwner = try await context.user(to)
                let membership = try await context.memberships.transferOwnership(
                    of: try Parse.couple(couple), to: newOwner.id, as: actor)
                try acting.output.print(
                    membership, "\(newOwner.email) now owns couple \(idText(membership.coupleID))")
            }
        }
    }
}
