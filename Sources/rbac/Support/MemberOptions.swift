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
    /// JSON with --json, else `message`.
    func change(
        _ acting: ActingOptions,
        _ body: (CommandContext, Actor, _ user: UUID, _ couple: UUID) async throws -> Membership,
        message: (User, Membership) -> String
    ) async throws {
        try await acting.run { context, actor in
            let user = try await context.user(user)
            let membership = try await body(context, actor, user.id, try Parse.couple(couple))
            try acting.output.print(membership, message(user, membership))
        }
    }
}
