import Collaboration
import Delivery
import Foundation
import OutboundHTTP
import Postgres
import Secrets
import Storage
import TestSupport
import Testing

/// Invitation emails through the outbox, to a real SMTP server (aiosmtpd) that requires STARTTLS under a test CA
/// and parses each message with Python's email package.
@Suite("Invitation emails through the outbox", .timeLimit(.minutes(2)))
struct InvitationEmailTests {
    struct Received: Decodable {
        struct Part: Decodable {
            let type: String
            let text: String
        }
        let mailFrom: String
        let mailOptions: [String]
        let rcptTos: [String]
        let from: String
        /// The From header as a mail reader takes it: each sender's name and address.
        let fromAddresses: [[String]]
        let to: String
        let tls: Bool
        let subject: String
        let messageId: String
        let autoSubmitted: String
        let contentType: String
        let parts: [Part]
        let crlfOnly: Bool
        let headersAscii: Bool
        let authenticated: Bool
    }

    static func received(_ peer: HTTPSPeer) throws -> [Received] {
        guard let text = try? String(contentsOf: peer.root.appendingPathComponent("received.jsonl"), encoding: .utf8)
        else { return [] }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try text.split(separator: "\n").map { try decoder.decode(Received.self, from: Data($0.utf8)) }
    }

    struct Setup {
        let pool: PostgresConnectionPool
        let peer: HTTPSPeer
        let invitations: CollaborationInvitationService
        let couple: UUID
        let owner: UUID
        let key: DeliveryKey

        /// The owner invites `email` as a viewer.
        @discardableResult
        func invite(_ email: String) async throws -> IssuedInvitation {
            try await invitations.invite(
                to: couple, role: RoleName(rawValue: "viewer")!, email: EmailAddress(rawValue: email),
                as: .user(owner))
        }

        /// A worker sending mail through the test server, from the couple's app.
        var worker: OutboxWorker {
            get throws { try worker(try server(), from: "Wedding <no-reply@wedding.test>") }
        }

        /// A worker sending mail through `server`.
        func worker(_ server: OutboundMail, from: String = "no-reply@wedding.test") throws -> OutboxWorker {
            OutboxWorker(
                outbox: PostgresOutbox(pool: pool), http: OutboundHTTP(), key: key,
                mail: try OutboxWorker.Mail(server: server, from: from), links: URL(string: "https://rbac.test")!)
        }

        /// The test server at `peer`, with a login when given.
        func server(user: String? = nil, password: String? = nil) throws -> OutboundMail {
            try OutboundMail(
                server: URL(string: "smtp://localhost:\(peer.baseURL.port!)")!, username: user, password: password,
                caFile: peer.caFile)
        }

        /// The invitation to pia@example.com as the test server received it, mailed from `from` once the couple
        /// is named `name` (by raw SQL, which the rules need not have held).
        func mailed(coupleNamed name: String, from: String = "Wedding <no-reply@wedding.test>") async throws
            -> Received
        {
            _ = try await pool.query("UPDATE couples SET name = \(name) WHERE id = \(couple)")
            try await invite("pia@example.com")
            #expect(try await worker(try server(), from: from).runOnce() == [.delivered])
            return try #require(try InvitationEmailTests.received(peer).first)
        }

        /// The email message's last error.
        func lastError() async throws -> String {
            try await pool.query("SELECT last_error FROM outbox WHERE channel = 'email'")[0].decode(column: 0)
        }
    }

    static func withServer(_ body: (Setup) async throws -> Void) async throws {
        try await HTTPSPeer.with(script: "smtp_server.py") { peer in
            try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 6) { pool in
                let key = try DeliveryKey(hex: DeliveryKey.generateHex())
                let repository = PostgresCollaborationRepository(pool: pool, deliveryKey: key)
                let owner = try await repository.addUser(
                    email: EmailAddress(rawValue: "olivia@example.com")!, displayName: "Olivia")
                let couple = try await repository.createCouple(
                    name: "Zoë & Łukasz", owner: owner.id, as: .operator(label: "tests"))
                try await body(
                    Setup(
                        pool: pool, peer: peer,
                        invitations: CollaborationInvitationService(
                            repository: repository, baseURL: URL(string: "https://rbac.test")!),
                        couple: couple.id, owner: owner.id, key: key))
            }
        }
    }

    /// A rotation loses nothing; a reset gives up what waits under the old key (its emails die saying so).
    @Test(
        "a key rotated or reset while invitations are made and mailed with the old one, many rounds: each lands before or after",
        arguments: ["rotate", "reset"])
    func keyChangeRaces(change: String) async throws {
        try await Self.withServer { setup in
            _ = try await setup.pool.query("UPDATE invitation_settings SET per_couple_per_hour = 1000")
            let outbox = PostgresOutbox(pool: setup.pool)
            let mail = try OutboxWorker.Mail(server: try setup.server(), from: "no-reply@wedding.test")
            @Sendable func worker(_ key: DeliveryKey) -> OutboxWorker {
                OutboxWorker(
                    outbox: outbox, http: OutboundHTTP(), key: key, mail: mail, links: URL(string: "https://rbac.test")!
                )
            }
            var (key, made, mailedByOld, orders) = (setup.key, 0, 0, Set<[String]>())
            for round in 0..<30 {
                let (old, new) = (key, try DeliveryKey(hex: DeliveryKey.generateHex()))
                let invitations = CollaborationInvitationService(
                    repository: PostgresCollaborationRepository(pool: setup.pool, deliveryKey: old),
                    baseURL: URL(string: "https://rbac.test")!)
                @Sendable func invite(_ name: String) async throws {
                    _ = try await invitations.invite(
                        to: setup.couple, role: RoleName(rawValue: "viewer")!,
                        email: EmailAddress(rawValue: "\(name)\(round)@example.com"), as: .user(setup.owner))
                }
                try await invite("before")
                // The change of key, an invitation made with the old key, and the old key's worker mailing the one
                // made before: each lands wholly before the change, or is refused after it (a reset, finding the
                // worker mailing, is refused instead, and made once the worker has answered).
                let order = try await race(3) { index, go in
                    await go()
                    do {
                        switch index {
                        case 0 where change == "rotate": _ = try await outbox.rotateKey(from: old, to: new)
                        case 0: _ = try await outbox.resetKey(to: new)
                        case 1: try await invite("during")
                        default: return try await worker(old).runOnce().map(\.rawValue).joined(separator: ",")
                        }
                        return "done"
                    } catch is DeliveryKeyMismatch {
                        return "refused"
                    } catch let error as CollaborationError where error.code == .inProgress {
                        return "waits"
                    }
                }
                // A reset refused while the old key's worker was mailing is made now that the worker has answered.
                if order[0] == "waits" { _ = try await outbox.resetKey(to: new) }
                orders.insert(order)
                made += order[1] == "done" ? 2 : 1
                mailedByOld += order[2].split(separator: ",").count { $0 == "delivered" }
                key = new
                let sent = try await WebhookDeliveryTests.drain(worker(new))
                #expect(sent.allSatisfy { $0 == .delivered }, "round \(round): \(order), then \(sent)")
            }
            let received = try Self.received(setup.peer)
            if change == "rotate" {
                #expect(try await setup.pool.count("SELECT count(*) FROM outbox WHERE status <> 'sent'") == 0)
                #expect(received.count == made)
            } else {
                // What the old key mailed went, and is recorded sent; what waited under it died, saying why.
                #expect(received.count == mailedByOld)
                let sent = try await setup.pool.count("SELECT count(*) FROM outbox WHERE status = 'sent'")
                let died = try await setup.pool.count(
                    "SELECT count(*) FROM outbox WHERE status = 'dead' AND last_error LIKE '%lost and reset%'")
                #expect(sent + died == made && sent == mailedByOld, "sent \(sent), died \(died), made \(made)")
            }
            #expect(
                received.allSatisfy { $0.parts.contains { $0.text.contains("https://rbac.test/invitations/inv_") } })
            #expect(orders.count >= 2, "the sides should land in more than one order: \(orders)")
        }
    }

    @Test("an invitation's email: over STARTTLS, multipart, encoded subject, the link once; nothing usable kept")
    func sent() async throws {
        try await Self.withServer { setup in
            let issued = try await setup.invitations.invite(
                to: setup.couple, role: RoleName(rawValue: "planner")!,
                email: EmailAddress(rawValue: "pia@example.com"),
                as: .user(setup.owner))
            #expect(try await setup.worker.runOnce() == [.delivered])
            let mail = try #require(try Self.received(setup.peer).first)
            #expect(mail.tls && mail.rcptTos == ["pia@example.com"] && mail.to == "pia@example.com")
            #expect(!mail.mailOptions.contains("SMTPUTF8"))
            #expect(mail.subject == "You're invited to join Zoë & Łukasz")
            #expect(
                mail.contentType == "multipart/alternative" && mail.parts.map(\.type) == ["text/plain", "text/html"])
            #expect(mail.autoSubmitted == "auto-generated" && mail.crlfOnly && mail.headersAscii)
            let id: String = try await setup.pool.query("SELECT id::text FROM outbox WHERE channel = 'email'")[0]
                .decode(column: 0)
            #expect(mail.messageId == "<\(id)@wedding.test>")
            #expect(mail.parts[0].text.contains(issued.link.absoluteString) && mail.parts[0].text.contains("Olivia"))
            #expect(mail.parts[1].text.contains("href=\"\(issued.link.absoluteString)\""))
            #expect(mail.parts[0].text.contains(" UTC") && mail.parts[0].text.contains("planner"))
            #expect(try await setup.pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 0)
            let dump = try await setup.pool.dump()
            #expect(!dump.contains(issued.token.rawValue) && !dump.contains(String(issued.token.rawValue.dropFirst(4))))
        }
    }

    @Test("the inviter is named as they are when the email is sent; the operator's label never reaches an invitee")
    func inviterWhenSent() async throws {
        try await Self.withServer { setup in
            try await setup.invite("pia@example.com")
            _ = try await setup.pool.query("UPDATE users SET display_name = 'Olivia Berg' WHERE id = \(setup.owner)")
            _ = try await setup.invitations.invite(
                to: setup.couple, role: RoleName(rawValue: "viewer")!,
                email: EmailAddress(rawValue: "vera@example.com"),
                as: .operator(label: "support desk"))
            #expect(
                try await setup.pool.count("SELECT count(*) FROM outbox WHERE payload::text ~ 'Olivia|support desk'")
                    == 0,
                "the outbox keeps no inviter")
            #expect(try await setup.worker.runOnce() == [.delivered, .delivered])
            let texts = Dictionary(
                uniqueKeysWithValues: try Self.received(setup.peer).map { ($0.to, $0.parts[0].text) })
            #expect(texts["pia@example.com"]?.contains("Olivia Berg invites you") == true, "\(texts)")
            #expect(texts["vera@example.com"]?.contains("The couple's administrator invites you") == true, "\(texts)")
            #expect(!texts.values.contains { $0.contains("support desk") })
        }
    }

    @Test("a couple's name that looks like an encoded word reaches the reader as written, not decoded")
    func nameLikeAnEncodedWord() async throws {
        try await Self.withServer { setup in
            // `=?UTF-8?B?4oCu?=` is a right-to-left override, encoded.
            let name = "Ann =?UTF-8?B?4oCu?= Bo"
            let mail = try await setup.mailed(coupleNamed: name, from: "=?UTF-8?B?4oCu?=, <no-reply@wedding.test>")
            #expect(mail.subject == "You're invited to join \(name)" && mail.headersAscii)
            #expect(mail.fromAddresses == [["=?UTF-8?B?4oCu?=,", "no-reply@wedding.test"]])
        }
    }

    @Test("a couple's name that raw SQL gave a line break or an override is sent escaped, never as a header")
    func rawSQLName() async throws {
        try await Self.withServer { setup in
            let mail = try await setup.mailed(
                coupleNamed: "Zo\u{EB}\u{202E} & \u{141}ukasz\r\nBcc: eve@example.com")
            let shown = #"Zo\#u{EB}\u{202E} & \#u{141}ukasz\u{D}\u{A}Bcc: eve@example.com"#
            #expect(mail.subject == "You're invited to join \(shown)")
            #expect(mail.rcptTos == ["pia@example.com"], "no second header, no second recipient")
            #expect(mail.parts[0].text.contains(shown) && !mail.parts[0].text.contains("\u{202E}"))
            #expect(mail.parts[1].text.contains("<bdi>\(shown.replacingOccurrences(of: "&", with: "&amp;"))</bdi>"))
        }
    }

    @Test(
        "an address beyond ASCII is mailed at its domain's ASCII spelling, which any server takes; SMTPUTF8 only for a local part beyond it",
        arguments: [
            ("zo\u{EB}@example.com", "zo\u{EB}@example.com", true),
            ("ann@b\u{FC}cher.example", "ann@xn--bcher-kva.example", false),
            ("zo\u{EB}@b\u{FC}cher.example", "zo\u{EB}@xn--bcher-kva.example", true),
        ])
    func internationalAddress(invited: String, mailed: String, smtpUTF8: Bool) async throws {
        try await Self.withServer { setup in
            try await setup.invite(invited)
            #expect(try await setup.worker.runOnce() == [.delivered])
            let mail = try #require(try Self.received(setup.peer).first)
            #expect(mail.rcptTos == [mailed] && mail.to == mailed)
            #expect(mail.mailOptions.contains("SMTPUTF8") == smtpUTF8)
        }
    }

    @Test("a sender beyond ASCII is sent as any server takes it: the domain's ASCII spelling, the name encoded")
    func internationalSender() async throws {
        try await Self.withServer { setup in
            try await setup.invite("pia@example.com")
            let worker = try setup.worker(try setup.server(), from: "Hochzeit M\u{FC}ller <hallo@m\u{FC}ller.example>")
            #expect(try await worker.runOnce() == [.delivered])
            let mail = try #require(try Self.received(setup.peer).first)
            #expect(mail.mailFrom == "hallo@xn--mller-kva.example" && !mail.mailOptions.contains("SMTPUTF8"))
            #expect(mail.from == "Hochzeit M\u{FC}ller <hallo@xn--mller-kva.example>" && mail.headersAscii)
        }
    }

    @Test("a sender's name with a comma, an angle bracket or a quote is one sender, named as typed")
    func quotedSender() async throws {
        try await Self.withServer { setup in
            let names = [#"Ann, Bo & "Co""#, "Ann <the planner>", #"A\B: J. Smith"#]
            for name in names {
                try await setup.invite("pia@example.com")
                let worker = try setup.worker(try setup.server(), from: "\(name) <no-reply@wedding.test>")
                #expect(try await worker.runOnce() == [.delivered])
            }
            let mails = try Self.received(setup.peer)
            #expect(mails.map(\.fromAddresses) == names.map { [[$0, "no-reply@wedding.test"]] })
        }
    }

    @Test("a 4xx reply is retried; a 5xx reply is dead at once with the reply; a raw SQL invitation has no link")
    func refusals() async throws {
        try await Self.withServer { setup in
            try "450 mailbox busy\n550 no such user\n".write(
                to: setup.peer.root.appendingPathComponent("replies"), atomically: true, encoding: .utf8)
            try await setup.invite("a@example.com")
            #expect(try await setup.worker.runOnce() == [.retry])
            #expect(
                try await setup.pool.count(
                    "SELECT count(*) FROM outbox WHERE channel = 'email' AND token_box IS NOT NULL AND status = 'pending'"
                )
                    == 1, "the sealed link waits with the message")
            _ = try await setup.pool.query("UPDATE outbox SET next_attempt_at = now()")
            #expect(try await setup.worker.runOnce() == [.dead])
            let error = try await setup.lastError()
            #expect(error.contains("550"), "\(error)")
            #expect(try await setup.pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 0)

            let hash = Data(SecretToken.generate(.invitation).hash)
            _ = try await setup.pool.query(
                "SELECT create_invitation(\(setup.couple), \(hash), 'viewer', 'raw@example.com')")
            #expect(try await setup.worker.runOnce() == [.dead])
            #expect(try Self.received(setup.peer).isEmpty)
        }
    }

    @Test("a server that requires AUTH: no login or a wrong one waits for the settings; the right one is sent")
    func login() async throws {
        try await Self.withServer { setup in
            try "rbac:s3cret\n".write(
                to: setup.peer.root.appendingPathComponent("credentials"), atomically: true, encoding: .utf8)
            try await setup.invite("a@example.com")
            for (user, password) in [(nil, nil), ("rbac", "wrong")] as [(String?, String?)] {
                let worker = try setup.worker(try setup.server(user: user, password: password))
                #expect(try await worker.runOnce() == [.retry], "\(user ?? "no login")")
                _ = try await setup.pool.query("UPDATE outbox SET next_attempt_at = now()")
            }
            let error = try await setup.lastError()
            #expect(!error.contains("wrong") && !error.contains("s3cret"), "no password in the error: \(error)")
            #expect(
                try await setup.worker(try setup.server(user: "rbac", password: "s3cret")).runOnce() == [.delivered])
            let mail = try #require(try Self.received(setup.peer).first)
            #expect(mail.authenticated && mail.tls, "logged in, over STARTTLS")
        }
    }

    @Test("a mail server that refuses connections gets the message again later, its sealed link kept")
    func unreachable() async throws {
        try await Self.withServer { setup in
            try await setup.invite("c@example.com")
            let (socket, closed) = try listeningOnLoopback()
            close(socket)  // nothing listens there now
            for server in ["smtp://127.0.0.1:\(closed)", "smtp+insecure://127.0.0.1:\(closed)"] {
                _ = try await setup.pool.query("UPDATE outbox SET next_attempt_at = now(), attempts = 0")
                let worker = try setup.worker(try OutboundMail(server: URL(string: server)!))
                #expect(try await worker.runOnce() == [.retry], "\(server)")
            }
            let error = try await setup.lastError()
            #expect(error.contains("127.0.0.1"), "\(error)")
            #expect(try await setup.pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 1)
        }
    }

    @Test("accepting or revoking an invitation erases the sealed link of its unsent email, which is not sent again")
    func erasedOnAcceptance() async throws {
        try await Self.withServer { setup in
            let issued = try await setup.invite("b@example.com")
            #expect(try await setup.pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 1)
            _ = try await setup.invitations.revoke(issued.invitation.id, in: setup.couple, as: .user(setup.owner))
            #expect(try await setup.pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 0)
            let email = try await setup.pool.query("SELECT id FROM outbox WHERE channel = 'email'")[0]
            let refusal = await #expect(throws: CollaborationError.self) {
                try await PostgresOutbox(pool: setup.pool).retry(try email.decode("id"))
            }
            #expect(refusal?.message.contains("invite again") == true, "\(String(describing: refusal))")
            let error = try await setup.lastError()
            #expect(error == "not sent: the invitation was accepted, revoked, expired or deleted first", "\(error)")
            #expect(try await setup.worker.runOnce() == [], "nothing left to send, a retry taking nothing back")
            #expect(try Self.received(setup.peer).isEmpty)
        }
    }
}
