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
}
