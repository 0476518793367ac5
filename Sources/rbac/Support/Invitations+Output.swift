import ArgumentParser
import Budget
import Collaboration
import Foundation

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
        "Invitation \(idText(invitation.id)) as \(invitation.role), expires \(invitation.expiresAt.iso8601)"
    )
    print("Link (shown once; only its hash is stored): \(issued.link.absoluteString)")
}
