import Collaboration
import Foundation

/// The invitation landing page, server-rendered: no external assets, readable on a phone.
enum InvitationPage {
    /// The page for a pending invitation. With sign-in at the app's identity provider (`signIn`), a button that
    /// starts it; otherwise a form that posts the bearer token the app supplies (an app's web view).
    static func pending(_ preview: InvitationPreview, token: String, signIn: Bool) -> String {
        let expires = preview.expiresAt.formatted(.iso8601)
        // "invites you as mom: May view the guests and the budget"; the role's author wrote the description.
        // What people wrote sits in <bdi>, so that a name written right to left, or one holding a bidirectional
        // override that reached the database by raw SQL, cannot turn the sentence around it.
        let described = preview.roleDescription.map { ": <bdi id=\"role-description\">\(escape($0))</bdi>" } ?? ""
        let access = preview.membershipExpiresAt.map {
            " Your access ends on <time id=\"access-ends\" datetime=\"\($0.formatted(.iso8601))\">\(inWords($0))</time>."
        }
        let bound = preview.emailHint.map {
            " It is for <strong><bdi id=\"email\">\(escape($0))</bdi></strong>: sign in with that address."
        }
        let accept =
            signIn
            // A link, not a form: the page's CSP allows forms to post only here, and the provider is elsewhere.
            ? """
            <p><a class="button" id="sign-in" href="/invitations/\(escape(token))/sign-in">Sign in to accept</a></p>
            """
            : """
            <form method="post" action="/invitations/\(escape(token))/accept">
              <input type="hidden" name="access_token" id="access_token" value="">
              <button type="submit" id="accept">Accept invitation</button>
            </form>
            <p class="muted">Open this link from the app you were invited to: it signs you in and accepts.</p>
            """
        return layout(
            // A title cannot isolate a name as <bdi> does: what would turn the tab's text around is shown escaped.
            title: "Join \(visible(preview.coupleName))",
            body: """
                <h1>You're invited to join <bdi id="couple">\(escape(preview.coupleName))</bdi></h1>
                <p><strong><bdi>\(escape(preview.inviter))</bdi></strong> invites you as <strong id="role">\(escape(preview.role.rawValue))</strong>\(described).\(access ?? "")</p>
                <p class="muted">This link expires on <time id="expires" datetime="\(expires)">\(inWords(preview.expiresAt))</time>.\
                \(bound ?? "")</p>
                \(accept)
                """)
    }

    /// The single page for every token that cannot be used: unknown, expired, used or revoked look the same.
    static let unusable = layout(
        title: "Invitation not valid",
        body: """
            <h1>This invitation link is not valid</h1>
            <p>It may have expired, been used or been withdrawn. Ask the couple for a new invitation.</p>
            """)

    /// After accepting; with the app's address, a link to go on there.
    static func accepted(_ membership: Membership, coupleName: String, appURL: URL? = nil) -> String {
        layout(
            title: "Welcome",
            body: """
                <h1 id="welcome">Welcome to <bdi>\(escape(coupleName))</bdi></h1>
                <p>You joined as <strong>\(escape(membership.role.rawValue))</strong>.</p>
                \(appURL.map { "<p><a id=\"app\" href=\"\(escape($0.absoluteString))\">Go to the app</a></p>" } ?? "")
                """)
    }

    /// When the invitation could not be read, for `message`'s reason (the database away).
    static func notShown(_ message: String) -> String {
        layout(
            title: "Invitation not shown",
            body: """
                <h1>The invitation cannot be shown right now</h1>
                <p>Reload this page in a moment (\(escape(message))).</p>
                """)
    }

    static func problem(_ message: String) -> String {
        layout(title: "Could not accept", body: "<h1>Could not accept the invitation</h1><p>\(escape(message))</p>")
    }

    private static func layout(title: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>\(escape(title))</title>
        <style>
          body { font-family: system-ui, sans-serif; max-width: 32rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; color: #222; }
          h1 { font-size: 1.5rem; }
          button, .button { display: block; box-sizing: border-box; text-align: center; text-decoration: none; font-size: 1.1rem; padding: 0.75rem 1.5rem; border-radius: 0.5rem; border: 0; background: #6b4eff; color: white; width: 100%; }
          .muted { color: #666; font-size: 0.9rem; }
        </style>
        </head>
        <body>
        \(body)
        </body>
        </html>
        """
    }
}
