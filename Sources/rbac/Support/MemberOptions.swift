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

    /// Runs `body` as the acting person, with the member's user and couple.
    func run<T>(
        _ acting: ActingOptions, _ body: (CommandContext, Actor, User, _ couple: UUID) async throws -> T
    ) async throws -> T {
        try await acting.run { context, actor in
            try await body(context, actor, try await context.user(user), try Parse.couple(couple))
        }
    }
}
