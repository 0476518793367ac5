import ArgumentParser
import Budget
import Collaboration
import Foundation

/// An invitation's lifetime as people write it: 30m, 12h, 7d.
struct Lifetime: ExpressibleByArgument {
    let duration: Duration

    init?(argument: String) {
        guard let match = argument.wholeMatch(of: /(\d{1,6})([mhd])/), let count = Int(match.1) else { return nil }
        let unit: Int =
            switch match.2 {
            case "m": 60
            case "h": 3600
            default: 86_400
            }
        duration = .seconds(count * unit)
    }
}

struct IssuedReport: Encodable {
    let invitation: Invitation
    let token: String
    let link: String

    init(_ issued: IssuedInvitation) {
        invitation = issued.invitation
        token = issued.token.rawValue
        link = issued.link.absoluteString
    }
}

func printIssued(_ issued: IssuedInvitation, json: Bool) throws {
    if json { return try printJSON(IssuedReport(issued)) }
    let invitation = issued.invitation
    print(
        "Invitation \(invitation.id.uuidString.lowercased()) as \(invitation.role), expires \(invitation.expiresAt.iso8601)"
    )
    print("Link (shown once; only its hash is stored): \(issued.link.absoluteString)")
}
