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

    /// Runs `body`, a change to the membership, as the acting person, and prints the membership it returns: as
    /// JSON with --json, else `message`. `unknownAddress`, given an address no user has, says what to do instead,
    /// or throws what would refuse that.
    func change(
        _ acting: ActingOptions,
        unknownAddress: ((CommandContext, Actor, EmailAddress) async throws -> String)? = nil,
        _ body: (CommandContext, Actor, _ user: UUID, _ couple: UUID) async throws -> Membership,
        message: (User, Membership) -> String
    ) async throws {
        try await acting.run { context, actor in
            let user: User
            do {
                user = try await context.user(self.user)
            } catch let error as CollaborationError where error.code == .notFound {
                guard let unknownAddress, case .email(let address) = try UserReference(parsing: self.user) else {
                    throw error
                }
                throw CollaborationError(
                    .notFound, "\(error.message): \(try await unknownAddress(context, actor, address))")
            }
            let membership = try await body(context, actor, user.id, try Parse.couple(couple))
            try acting.output.print(membership, message(user, membership))
        }
    }
}
