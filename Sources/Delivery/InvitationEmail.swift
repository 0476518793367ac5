import Foundation
import Tenancy

/// The email that carries an invitation's link: `multipart/alternative`, text and HTML, each base64 in UTF-8;
/// the subject in an RFC 2047 encoded word when it is not plain ASCII; the outbox row's id as `Message-ID`, so a
/// message sent twice is recognisably one; `Auto-Submitted: auto-generated`. A name's control characters are
/// shown escaped, never folded into a second header.
struct InvitationEmail {
    let id: UUID
    /// As `OutboxWorker.Mail` reads it, and `to` as `EmailAddress` takes it: neither holds a control character.
    let from: String
    let to: String
    let coupleName: String
    let inviter: String
    let role: String
    let expires: Date
    let link: String

    func message(at now: Date) -> [UInt8] {
        // Names are checked when typed, but one written by raw SQL may hold a line break (a forged header in the
        // subject) or a bidirectional override (the sentence around it turned around): shown escaped.
        let (coupleName, inviter) = (visible(coupleName), visible(inviter))
        let boundary = "=_rbac_\(id.uuidString.lowercased())"
        let domain = from.split(separator: "@").last.map { $0.filter { $0 != ">" } } ?? "rbac"
        let text = """
            \(inviter) invites you to join \(coupleName) as \(role).

            Accept the invitation: \(link)

            The link works once and expires on \(inWords(expires)). If you did not expect it, ignore this email.
            """
        let html = """
            <!doctype html><html><body style="font-family: system-ui, sans-serif">
            <p><strong><bdi>\(escape(inviter))</bdi></strong> invites you to join \
            <strong><bdi>\(escape(coupleName))</bdi></strong> as \
            <strong>\(escape(role))</strong>.</p>
            <p><a href="\(escape(link))">Accept the invitation</a></p>
            <p style="color: #666">The link works once and expires on \(escape(inWords(expires))).</p>
            </body></html>
            """
        let headers = [
            "From: \(from)", "To: <\(to)>", "Subject: \(Self.encodedWord("You're invited to join \(coupleName)"))",
            "Date: \(Self.date(now))", "Message-ID: <\(id.uuidString.lowercased())@\(domain)>", "MIME-Version: 1.0",
            "Auto-Submitted: auto-generated", "Content-Type: multipart/alternative; boundary=\"\(boundary)\"",
        ]
        let parts = [("text/plain", text), ("text/html", html)].map { type, body in
            """
            --\(boundary)\r
            Content-Type: \(type); charset=utf-8\r
            Content-Transfer-Encoding: base64\r
            \r
            \(Self.base64Lines(body))\r

            """
        }
        return Array((headers.joined(separator: "\r\n") + "\r\n\r\n" + parts.joined() + "--\(boundary)--\r\n").utf8)
    }

    /// Plain ASCII as it is; anything else as RFC 2047 encoded words of at most 75 characters, folded. ASCII that
    /// holds `=?` is encoded too: a mail reader decodes what looks like an encoded word, and a couple named
    /// `=?UTF-8?B?4oCu?=` would put a right-to-left override in the subject that `visible` never saw.
    static func encodedWord(_ text: String) -> String {
        if text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }), !text.contains("=?") {
            return text
        }
        var words: [String] = []
        var chunk = ""
        for character in text {
            // 45 bytes of UTF-8 make 60 of base64: with "=?UTF-8?B?" and "?=", 72 at most.
            if chunk.utf8.count + String(character).utf8.count > 45 {
                words.append(chunk)
                chunk = ""
            }
            chunk.append(character)
        }
        words.append(chunk)
        return words.map { "=?UTF-8?B?\(Data($0.utf8).base64EncodedString())?=" }.joined(separator: "\r\n ")
    }

    static func base64Lines(_ text: String) -> String {
        Data(text.utf8).base64EncodedString(options: [
            .lineLength76Characters, .endLineWithCarriageReturn,
            .endLineWithLineFeed,
        ])
    }

    /// RFC 5322's date: "Tue, 24 Nov 2026 22:51:25 +0000".
    static func date(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return formatter.string(from: date)
    }
}
