import Collaboration
import Foundation
import OutboundHTTP
import Postgres
import Prometheus
import Secrets
import Storage
import TestSupport
import Testing

@testable import Delivery

/// The outbox end to end: rows written by the database's triggers, sent by real workers over HTTPS to a receiver
/// that verifies each delivery with the reference Standard Webhooks implementation.
@Suite("Webhooks through the outbox", .timeLimit(.minutes(2)))
struct WebhookDeliveryTests {
    struct Received: Decodable {
        let id: String?
        let type: String?
        let verified: Bool
        let status: Int
        let link: String?
        /// The event, once verified.
        let event: JSONValue?
    }

    /// A migrated database, a receiver, and an endpoint for it whose secret the receiver knows.
    static func withReceiver(
        events: [String] = [],
        _ body: (PostgresConnectionPool, HTTPSPeer, OutboxWorker, DeliveryKey, WebhookEndpoint) async throws -> Void
    ) async throws {
        try await HTTPSPeer.with(script: "webhook_receiver.py") { peer in
            try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 8) { pool in
                let key = try DeliveryKey(hex: DeliveryKey.generateHex())
                let (endpoint, secret) = try await PostgresOutbox(pool: pool).addWebhook(
                    url: peer.baseURL.appendingPathComponent("hooks").absoluteString, eventTypes: events, key: key)
                try Data(secret.utf8).write(to: peer.root.appendingPathComponent("secret"))
                let worker = OutboxWorker(
                    outbox: PostgresOutbox(pool: pool), http: OutboundHTTP(.init(caFile: peer.caFile)), key: key)
                try await body(pool, peer, worker, key, endpoint)
                let dump = try await pool.dump()
                #expect(!dump.contains(secret) && !dump.contains(secret.dropFirst(6)), "no webhook secret in a dump")
            }
        }
    }

    static func received(_ peer: HTTPSPeer) throws -> [Received] {
        guard let text = try? String(contentsOf: peer.root.appendingPathComponent("received.jsonl"), encoding: .utf8)
        else { return [] }
        return try text.split(separator: "\n").map { try JSONDecoder().decode(Received.self, from: Data($0.utf8)) }
    }

    /// Sends until nothing is due.
    static func drain(_ worker: OutboxWorker) async throws -> [OutboxWorker.Outcome] {
        var outcomes: [OutboxWorker.Outcome] = []
        while true {
            let round = try await worker.runOnce()
            if round.isEmpty { return outcomes }
            outcomes += round
        }
    }

    @Test("every kind of event reaches the receiver as the OpenAPI document's webhooks describe it")
    func eventsAsDocumented() async throws {
        let checker = try SchemaChecker.openAPI()
        let document = checker.document
        try await Self.withReceiver { pool, peer, worker, key, endpoint in
            let repository = PostgresCollaborationRepository(pool: pool, deliveryKey: key)
            _ = try await PostgresOutbox(pool: pool).ping(endpoint.id)
            let invitations = CollaborationInvitationService(
                repository: repository, baseURL: URL(string: "https://rbac.test")!)
            let admin = Actor.operator(label: "tests")
            func user(_ name: String) async throws -> UUID {
                try await repository.addUser(email: EmailAddress(rawValue: "\(name)@example.com")!, displayName: nil).id
            }
            let (owner, partner, guest, late) = (
                try await user("olivia"), try await user("paul"), try await user("ines"), try await user("lou")
            )
            let couple = try await repository.createCouple(name: "Ours", owner: owner, as: admin).id
            _ = try await repository.renameCouple(couple, to: "Olivia & Paul", as: admin)
            // A couple's own role, made, given a second permission, and deleted: one event each.
            let (mom, guestsView) = (RoleName(rawValue: "mom")!, Permission(rawValue: "guests.view")!)
            _ = try await repository.createRole(
                couple: couple, name: mom, description: "Mom", permissions: [guestsView], as: admin)
            _ = try await repository.editRole(
                couple: couple, name: mom, description: nil,
                permissions: [guestsView, Permission(rawValue: "budget.view")!], as: admin)
            try await repository.deleteRole(couple: couple, name: mom, reassign: nil, as: admin)
            _ = try await repository.editUser(partner, UserEdit(displayName: "Paul"), as: admin)
            let (viewer, planner) = (RoleName(rawValue: "viewer")!, RoleName(rawValue: "planner")!)
            _ = try await repository.grant(couple: couple, user: partner, role: viewer, expiresAt: nil, as: admin)
            _ = try await repository.grant(couple: couple, user: partner, role: planner, expiresAt: nil, as: admin)
            _ = try await repository.transferOwnership(couple: couple, to: partner, as: .user(owner))
            _ = try await repository.remove(couple: couple, user: owner, as: .user(partner))
            let accepted = try await invitations.invite(
                to: couple, role: viewer, email: EmailAddress(rawValue: "ines@example.com"), as: admin)
            _ = try await repository.acceptInvitation(tokenHash: accepted.token.hash, user: guest, as: admin)
            let revoked = try await invitations.invite(to: couple, role: viewer, as: admin)
            try await repository.revokeInvitation(couple: couple, invitation: revoked.invitation.id, as: admin)
            let expiring = try await invitations.invite(to: couple, role: viewer, as: admin)
            let lateMembership = try await repository.grant(
                couple: couple, user: late, role: viewer, expiresAt: Date().addingTimeInterval(3600), as: admin)
            _ = try await pool.query(
                """
                UPDATE invitations SET expires_at = now() - interval '1 minute', created_at = now() - interval '8 days'
                WHERE id = \(expiring.invitation.id)
                """)
            _ = try await pool.query(
                "UPDATE memberships SET expires_at = now() - interval '1 minute' WHERE user_id = \(late)")
            _ = try await repository.sweepExpired()
            try await repository.deleteUser(guest, as: admin)
            try await repository.deleteCouple(couple, as: admin)
            // One left pending, whose event carries its link.
            let other = try await repository.createCouple(name: "Theirs", owner: late, as: admin).id
            let pending = try await invitations.invite(to: other, role: viewer, as: admin)
            _ = try await Self.drain(worker)

            let received = try Self.received(peer)
            #expect(Set(received.compactMap(\.type)) == Set(PostgresOutbox.eventTypes))
            #expect(received.contains { $0.event?["data"]?["link"] != nil })
            for delivery in received {
                let event = try #require(delivery.event, "\(delivery.type ?? "?") did not verify")
                let type = try #require(event["type"]?.string)
                let schema = try #require(
                    document["webhooks"]?[type]?["post"]?["requestBody"]?["content"]?["application/json"]?["schema"],
                    "\(type) is not documented")
                let problems = checker.problems(event, schema, at: type)
                #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
            }
            // Dates as the API writes them, to the character, so that a receiver may compare the two (both are
            // stored with fractions of a second here).
            func sent(_ type: String, _ ids: [String: UUID]) throws -> JSONValue? {
                let matching = received.filter { delivery in
                    delivery.type == type
                        && ids.allSatisfy {
                            delivery.event?["data"]?[$0.key]?.string == $0.value.uuidString.lowercased()
                        }
                }
                return try #require(matching.count == 1 ? matching.first : nil, "one \(type) of \(ids)").event?["data"]
            }
            func answered(_ value: some Encodable) throws -> JSONValue {
                let answer = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder.rbac().encode(value))
                return try #require(answer["expires_at"])
            }
            let invited = try sent("invitation.created", ["invitation_id": pending.invitation.id])
            #expect(invited?["expires_at"] == (try answered(pending.invitation)))
            let granted = try sent("membership.created", ["couple_id": couple, "user_id": late])
            #expect(granted?["expires_at"] == (try answered(lateMembership)))
            let edited = try sent("role.updated", ["couple_id": couple])
            #expect(edited?["permissions"] == .array([.string("budget.view"), .string("guests.view")]))
        }
    }

    @Test("changes made by raw SQL reach the receiver signed, once each, with the outbox row's id; all sent")
    func delivered() async throws {
        try await Self.withReceiver { pool, peer, worker, _, _ in
            let (owner, planner) = (try await pool.newUser(), try await pool.newUser())
            let couple = try await pool.newCouple(members: [(owner, "owner")])
            _ = try await pool.query(
                "INSERT INTO memberships (couple_id, user_id, role) VALUES (\(couple), \(planner), 'planner')")
            _ = try await pool.query(
                "UPDATE memberships SET role = 'viewer' WHERE couple_id = \(couple) AND user_id = \(planner)")
            _ = try await pool.query("DELETE FROM memberships WHERE couple_id = \(couple) AND user_id = \(planner)")
            _ = try await pool.query("DELETE FROM users WHERE id = \(planner)")
            _ = try await pool.query("UPDATE users SET display_name = 'Olivia' WHERE id = \(owner)")
            // The deleted planner's user.created went with them; the owner's stays.
            #expect(try await Self.drain(worker) == Array(repeating: .delivered, count: 8))

            let received = try Self.received(peer)
            #expect(received.allSatisfy { $0.verified }, "every delivery verifies with standardwebhooks")
            #expect(
                received.compactMap(\.type).sorted()
                    == [
                        "couple.created", "membership.created", "membership.created", "membership.removed",
                        "membership.updated", "user.created", "user.deleted", "user.updated",
                    ])
            let ids: [String] = try await pool.query("SELECT id::text FROM outbox WHERE status = 'sent' ORDER BY id")
                .map { try $0.decode(column: 0) }
            #expect(received.compactMap(\.id).sorted() == ids, "the webhook-id is the outbox row's id")
            #expect(try await pool.count("SELECT count(*) FROM outbox WHERE status <> 'sent'") == 0)
        }
    }

    @Test("invitation.created carries the link, sealed until sent; its other events and raw SQL's carry none")
    func invitationLink() async throws {
        try await Self.withReceiver(events: ["invitation.created", "invitation.revoked"]) {
            pool, peer, worker, key, _ in
            let repository = PostgresCollaborationRepository(pool: pool, deliveryKey: key)
            let owner = try await repository.addUser(email: EmailAddress(rawValue: "o@example.com")!, displayName: nil)
            let couple = try await repository.createCouple(name: "Ours", owner: owner.id, as: .operator(label: "t"))
            let invitations = CollaborationInvitationService(
                repository: repository, baseURL: URL(string: "http://localhost:8080")!)
            let issued = try await invitations.invite(
                to: couple.id, role: RoleName(rawValue: "viewer")!, as: .operator(label: "t"))
            #expect(try await pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 1)
            #expect(try await Self.drain(worker) == [.delivered])
            #expect(try Self.received(peer).map(\.link) == [issued.link.absoluteString])
            try await invitations.revoke(issued.invitation.id, in: couple.id, as: .operator(label: "t"))
            #expect(try await Self.drain(worker) == [.delivered])
            #expect(try Self.received(peer).last?.link == nil, "a revoked invitation's event carries no link")
            #expect(try await pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 0)
        }
    }

    @Test("a rotated secret signs beside the new one for the time kept, then not; kept for no time, not at all")
    func rotation() async throws {
        try await Self.withReceiver(events: ["user.created"]) { pool, peer, worker, key, endpoint in
            let outbox = PostgresOutbox(pool: pool)
            let file = peer.root.appendingPathComponent("secret")
            let first = try String(contentsOf: file, encoding: .utf8)
            /// Whether a delivery made now verifies with each secret the receiver is given in turn.
            func verifies(with secrets: [String]) async throws -> [Bool] {
                var verified: [Bool] = []
                for secret in secrets {
                    try Data(secret.utf8).write(to: file)
                    _ = try await pool.newUser()
                    #expect(try await Self.drain(worker) == [.delivered])
                    verified.append(try #require(try Self.received(peer).last).verified)
                }
                return verified
            }

            let before = Date()
            let (rotated, second) = try await outbox.rotateSecret(endpoint.id, key: key, keepingOld: .seconds(3600))
            let until = try #require(rotated.previousSecretUntil)
            #expect((before.addingTimeInterval(3599)...Date().addingTimeInterval(3601)).contains(until))
            #expect(try await verifies(with: [first, second]) == [true, true], "either secret verifies")

            _ = try await pool.query(
                "UPDATE webhook_endpoints SET previous_secret_until = now() - interval '1 second'")
            #expect(
                try await outbox.webhooks().first?.endpoint.previousSecretUntil == nil, "past its time, none is listed")
            #expect(try await verifies(with: [first, second]) == [false, true], "past its time, the old one is out")

            let (replaced, third) = try await outbox.rotateSecret(endpoint.id, key: key, keepingOld: .zero)
            #expect(replaced.previousSecretUntil == nil)
            #expect(try await verifies(with: [second, third]) == [false, true], "kept for no time: out at once")

            // A rotation within the time kept leaves the secret it replaces, not the one before that.
            let (_, fourth) = try await outbox.rotateSecret(endpoint.id, key: key, keepingOld: .seconds(60))
            let (_, fifth) = try await outbox.rotateSecret(endpoint.id, key: key, keepingOld: .seconds(60))
            #expect(try await verifies(with: [third, fourth, fifth]) == [false, true, true])
            let logged = try await pool.count(
                """
                SELECT count(*) FROM operator_audit_log
                WHERE action = 'webhook.update' AND NOT (before ? 'previous_secret_box' OR after ? 'previous_secret_box')
                  AND after ? 'previous_secret_until'
                """)
            #expect(logged == 5, "the four rotations and the update above are in the log, never a sealed secret")
        }
    }

    @Test("a worker holding another delivery key claims and kills nothing; nothing seals under it either")
    func foreignKey() async throws {
        try await Self.withReceiver { pool, peer, worker, key, _ in
            let other = try DeliveryKey(hex: DeliveryKey.generateHex())
            let outbox = PostgresOutbox(pool: pool)
            #expect(try await outbox.keyMatches(key) == true)
            #expect(try await outbox.keyMatches(other) == false)
            let misconfigured = OutboxWorker(
                outbox: outbox, http: OutboundHTTP(.init(caFile: peer.caFile)), key: other)
            // Running, it says so at once, before anything is due.
            let (reports, heard) = AsyncStream.makeStream(of: String.self)
            let running = Task { await misconfigured.run(retry: .milliseconds(50)) { heard.yield($0) } }
            var said = reports.makeAsyncIterator()
            #expect(await said.next() == "outbox delivery paused: \(DeliveryKeyMismatch())")
            running.cancel()
            await running.value

            let owner = try await pool.newUser()
            _ = try await pool.newCouple(members: [(owner, "owner")])
            func waiting() async throws -> Int {
                try await pool.count(
                    "SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND next_attempt_at <= now()"
                )
            }
            let queued = try await waiting()
            #expect(queued == 3)
            await #expect(throws: DeliveryKeyMismatch()) { try await misconfigured.runOnce() }
            #expect(try await waiting() == queued, "what it claimed is due again, its attempt uncounted")
            #expect(try Self.received(peer).isEmpty)

            await #expect(throws: DeliveryKeyMismatch()) {
                _ = try await outbox.addWebhook(url: "https://hooks.example.com/x", eventTypes: [], key: other)
            }
            let repository = PostgresCollaborationRepository(pool: pool, deliveryKey: other)
            let couple = try await repository.createCouple(name: "Ours", owner: owner, as: .operator(label: "t"))
            await #expect(throws: DeliveryKeyMismatch()) {
                _ = try await repository.createInvitation(
                    couple: couple.id, token: SecretToken.generate(.invitation), role: RoleName(rawValue: "viewer")!,
                    email: nil, expiresIn: .seconds(3600), membershipExpiresAt: nil, as: .operator(label: "t"))
            }
            #expect(try await pool.count("SELECT count(*) FROM invitations") == 0, "an invitation no one could send")
            #expect(try await pool.count("SELECT count(*) FROM webhook_endpoints") == 1)

            #expect(try await Self.drain(worker).count == queued + 2, "the database's key sends every one")
            #expect(try Self.received(peer).allSatisfy(\.verified))
        }
    }

    /// A viewer's invitation to a new couple, made by the operator, its token sealed under `key`; bound to `email`
    /// when given, which queues an email beside the webhook.
    static func invitation(_ pool: PostgresConnectionPool, key: DeliveryKey, email: EmailAddress? = nil) async throws
        -> IssuedInvitation
    {
        let repository = PostgresCollaborationRepository(pool: pool, deliveryKey: key)
        let owner = try await repository.addUser(email: EmailAddress(rawValue: "o@example.com")!, displayName: nil)
        let couple = try await repository.createCouple(name: "Ours", owner: owner.id, as: .operator(label: "t"))
        return try await CollaborationInvitationService(
            repository: repository, baseURL: URL(string: "http://localhost:8080")!
        ).invite(to: couple.id, role: RoleName(rawValue: "viewer")!, email: email, as: .operator(label: "t"))
    }

    @Test("a new delivery key takes over every secret and link at once: it sends them, the old one pauses")
    func keyRotation() async throws {
        try await Self.withReceiver(events: ["invitation.created"]) { pool, peer, worker, key, endpoint in
            let outbox = PostgresOutbox(pool: pool)
            let issued = try await Self.invitation(pool, key: key)
            // The receiver keeps the first secret, which now signs as the old one beside the current one.
            _ = try await outbox.rotateSecret(endpoint.id, key: key, keepingOld: .seconds(3600))
            let new = try DeliveryKey(hex: DeliveryKey.generateHex())
            func boxes() async throws -> String {
                try await pool.query(
                    "SELECT string_agg(secret_box::text || previous_secret_box::text, '') FROM webhook_endpoints"
                )[0].decode(column: 0)
            }
            let sealed = try await boxes()
            // A secret no key of this database opens (sealed under some third one) is counted and left as it is.
            let (stranded, lost) = (UUID(), Data((0..<60).map { UInt8($0) }))
            _ = try await pool.query(
                """
                INSERT INTO webhook_endpoints (id, url, event_types, secret_box)
                VALUES (\(stranded), 'https://hooks.example.com/lost', '{user.deleted}', \(lost))
                """)

            await #expect(throws: DeliveryKeyMismatch(whose: "the old delivery key")) {
                _ = try await outbox.rotateKey(from: new, to: new)
            }
            #expect(try await boxes() == sealed, "a refused rotation changes nothing")

            let rotation = try await outbox.rotateKey(from: key, to: new)
            #expect(rotation.webhookSecrets == 2 && rotation.invitationLinks == 1, "\(rotation)")
            #expect(rotation.unopened == 1)
            let kept: Data = try await pool.query("SELECT secret_box FROM webhook_endpoints WHERE id = \(stranded)")[0]
                .decode(column: 0)
            #expect(kept == lost)
            #expect(try await outbox.keyMatches(new) == true)
            #expect(try await outbox.keyMatches(key) == false)
            await #expect(throws: DeliveryKeyMismatch()) { try await worker.runOnce() }
            let renewed = OutboxWorker(outbox: outbox, http: OutboundHTTP(.init(caFile: peer.caFile)), key: new)
            #expect(try await Self.drain(renewed) == [.delivered])
            let received = try #require(try Self.received(peer).first)
            #expect(received.verified && received.link == issued.link.absoluteString)
            let logged = try await pool.count(
                "SELECT count(*) FROM operator_audit_log WHERE action LIKE 'delivery_key.%' AND NOT after ? 'check_box'"
            )
            #expect(logged == 2, "the first key and the rotation are in the operator's log, never the check")
        }
    }

    @Test("a lost delivery key is reset: new secrets sign, waiting emails die, links go; the database's key is refused")
    func keyReset() async throws {
        try await Self.withReceiver(events: ["invitation.created"]) { pool, peer, worker, key, endpoint in
            let outbox = PostgresOutbox(pool: pool)
            _ = try await Self.invitation(pool, key: key, email: EmailAddress(rawValue: "v@example.com"))
            _ = try await outbox.rotateSecret(endpoint.id, key: key, keepingOld: .seconds(3600))
            let rows: PostgresQuery = """
                SELECT (SELECT string_agg(e::text, '') FROM webhook_endpoints e)
                       || (SELECT string_agg(o::text, '' ORDER BY o.id) FROM outbox o)
                       || (SELECT check_box::text FROM delivery_key_check) AS state
                """
            let before: String = try await pool.query(rows)[0].decode("state")

            await #expect(throws: CollaborationError.self) { try await outbox.resetKey(to: key) }
            #expect(try await pool.query(rows)[0].decode("state") == before, "a refused reset changes nothing")

            // A worker sending under the key shows that it is not lost: the reset leaves what it sends alone.
            let new = try DeliveryKey(hex: DeliveryKey.generateHex())
            let sending = try await outbox.claim(limit: 1, lease: .seconds(60), channels: ["email"], key: key)
            let leased: String = try await pool.query(rows)[0].decode("state")
            let busy = await #expect(throws: CollaborationError.self) { try await outbox.resetKey(to: new) }
            #expect(busy?.code == .inProgress && busy?.message.contains("rotate") == true, "\(busy?.message ?? "")")
            #expect(try await pool.query(rows)[0].decode("state") == leased, "a refused reset changes nothing")
            try await outbox.failed(try #require(sending.first), error: "the server answered 421", retryIn: .zero)

            let reset = try await outbox.resetKey(to: new)
            #expect(reset.webhooks.map(\.id) == [endpoint.id] && reset.webhooks[0].url == endpoint.url)
            #expect(reset.invitationEmails == 1 && reset.invitationLinks == 1, "\(reset)")
            #expect(try await outbox.keyMatches(new) == true)
            await #expect(throws: DeliveryKeyMismatch()) { try await worker.runOnce() }
            let email = try await pool.query("SELECT status, last_error, token_box FROM outbox WHERE channel = 'email'")
            #expect(try email[0].decode("status", as: String.self) == "dead")
            #expect(try email[0].decode("last_error", as: String?.self)?.contains("invite again") == true)
            #expect(try await pool.count("SELECT count(*) FROM outbox WHERE token_box IS NOT NULL") == 0)
            let endpoints = try await outbox.webhooks()
            #expect(endpoints.map(\.endpoint.previousSecretUntil) == [nil], "the old secrets sign nothing more")

            // The receiver given the new secret verifies what the new key sends, which carries no link.
            try Data(reset.webhooks[0].secret.utf8).write(to: peer.root.appendingPathComponent("secret"))
            let renewed = OutboxWorker(outbox: outbox, http: OutboundHTTP(.init(caFile: peer.caFile)), key: new)
            #expect(try await Self.drain(renewed) == [.delivered])
            let received = try #require(try Self.received(peer).first)
            #expect(received.verified && received.link == nil, "\(received)")
            let logged = try await pool.count(
                "SELECT count(*) FROM operator_audit_log WHERE action = 'delivery_key.update' AND NOT after ? 'check_box'"
            )
            #expect(logged == 1, "the reset is in the operator's log, never the check")
            let dump = try await pool.dump()
            #expect(!dump.contains(reset.webhooks[0].secret.dropFirst(6)), "no new secret in a dump")
        }
    }

    @Test("an endpoint answering 500 is retried on the schedule; 410 disables it, its messages die until it is enabled")
    func retriesThenGone() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, _, endpoint in
            try "500\n410\n".write(to: peer.root.appendingPathComponent("statuses"), atomically: true, encoding: .utf8)
            let couple = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            // Bounded by the clock around the attempt, not by when the row is read: a loaded machine reads late.
            let attempting = Date()
            #expect(try await worker.runOnce() == [.retry])
            let attempted = Date()
            let row = try await pool.query(
                """
                SELECT attempts, last_error, next_attempt_at AS due
                FROM outbox WHERE couple_id = \(couple)
                """)[0]
            #expect(try row.decode("attempts", as: Int32.self) == 1)
            #expect(try row.decode("last_error", as: String?.self) == "the endpoint answered 500")
            let due = try row.decode("due", as: Date.self)
            #expect(
                (attempting.addingTimeInterval(4.5)...attempted.addingTimeInterval(5.5)).contains(due),
                "5 s after the attempt, within 10%")
            #expect(try await worker.runOnce() == [], "not due yet")

            _ = try await pool.query("UPDATE outbox SET next_attempt_at = now() WHERE couple_id = \(couple)")
            #expect(try await worker.runOnce() == [.disabled])
            #expect(try await pool.count("SELECT count(*) FROM outbox WHERE status = 'dead'") == 1)
            let disabled = try await PostgresOutbox(pool: pool).webhooks().first { $0.endpoint.id == endpoint.id }
            #expect(disabled?.endpoint.disabledAt != nil && disabled?.dead == 1 && disabled?.waiting == 0)
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            #expect(
                try await pool.count("SELECT count(*) FROM outbox") == 1, "a disabled endpoint is sent nothing more")
            let dead = try await pool.query("SELECT id, o::text AS row FROM outbox o")[0]
            let refusal = await #expect(throws: CollaborationError.self) {
                try await PostgresOutbox(pool: pool).retry(try dead.decode("id"))
            }
            #expect(
                refusal?.code == .notFound && refusal?.message.contains("410 Gone") == true,
                "\(String(describing: refusal))")
            let after: String = try await pool.query("SELECT o::text FROM outbox o")[0].decode(column: 0)
            #expect(after == (try dead.decode("row", as: String.self)), "nor is a retry of its dead message taken")

            // Enabled again, with its secret and events as they were: its dead message may be retried, and it is
            // sent what comes next.
            let outbox = PostgresOutbox(pool: pool)
            let enabled = try await outbox.editWebhook(endpoint.id, url: nil, eventTypes: nil, enable: true)
            #expect(enabled.disabledAt == nil && enabled.eventTypes == ["membership.created"], "\(enabled)")
            _ = try await outbox.retry(try dead.decode("id"))
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            #expect(try await worker.runOnce() == [.delivered, .delivered])
            let answered = try Self.received(peer).filter { $0.status == 204 }
            #expect(answered.count == 2 && answered.allSatisfy(\.verified), "signed by the secret it kept")
        }
    }

    @Test("an endpoint URL that raw SQL wrote and no URL parses kills its messages, and stops no worker")
    func unparsableURL() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, _, endpoint in
            // Within the table's check (https://, no whitespace), where `webhookURL` refuses it.
            _ = try await pool.query("UPDATE webhook_endpoints SET url = 'https://[x/hooks' WHERE id = \(endpoint.id)")
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            #expect(try await worker.runOnce() == [.dead])
            let error: String = try await pool.query("SELECT last_error FROM outbox")[0].decode(column: 0)
            #expect(error.contains("URL is not one rbac can call"), "\(error)")
            #expect(try Self.received(peer).isEmpty)
        }
    }

    @Test(
        "an endpoint's Retry-After (seconds or a date) puts the retry later than the schedule, never sooner or past 10 h"
    )
    func retryAfter() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, _, _ in
            let format = DateFormatter()
            format.locale = Locale(identifier: "en_US_POSIX")
            format.timeZone = TimeZone(identifier: "GMT")
            format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let date = format.string(from: Date().addingTimeInterval(1000))
            // The answers, and when each attempt's retry falls due: attempts 1 to 5 are scheduled 5 s, 5 min,
            // 30 min, 2 h and 5 h later. The date was 1,000 s ahead when the test began, which on a loaded machine
            // may be a minute or more before the worker reads it: well after the 5 min it overrides all the same.
            let answers: [(String, ClosedRange<Int32>)] = [
                ("503 Retry-After: 3600", 3590...3600), ("429 Retry-After: \(date)", 800...1001),
                ("503 Retry-After: 999999", 35_990...36_000), ("503 Retry-After: soon", 6480...7920),
                ("503 Retry-After: 1", 16_200...19_800),
            ]
            try answers.map(\.0).joined(separator: "\n").write(
                to: peer.root.appendingPathComponent("statuses"), atomically: true, encoding: .utf8)
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            for (answer, due) in answers {
                #expect(try await worker.runOnce() == [.retry], "\(answer)")
                let dueIn: Int32 = try await pool.query(
                    "SELECT extract(epoch FROM next_attempt_at - now())::int AS due_in FROM outbox")[0].decode("due_in")
                #expect(due.contains(dueIn), "\(answer): due in \(dueIn) s")
                _ = try await pool.query("UPDATE outbox SET next_attempt_at = now()")
            }
        }
    }

    @Test("an endpoint too slow to answer in time is retried on the schedule, and the retry is delivered")
    func timeout() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, _, key, _ in
            try "sleep 3\n".write(to: peer.root.appendingPathComponent("statuses"), atomically: true, encoding: .utf8)
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            let impatient = OutboxWorker(
                outbox: PostgresOutbox(pool: pool),
                http: OutboundHTTP(.init(totalTimeout: .seconds(1), caFile: peer.caFile)), key: key)
            #expect(try await impatient.runOnce() == [.retry])
            let error: String = try await pool.query("SELECT last_error FROM outbox")[0].decode(column: 0)
            #expect(error.lowercased().contains("timeout"), "\(error)")
            _ = try await pool.query("UPDATE outbox SET next_attempt_at = now()")
            #expect(try await impatient.runOnce() == [.delivered])
        }
    }

    @Test("a worker stopped while sending gives the message back: due at once, the attempt not counted")
    func stoppedWhileSending() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, _, _ in
            // Left alone, the receiver answers 204 after 10 s, within the worker's 15.
            try "sleep 10\n".write(to: peer.root.appendingPathComponent("statuses"), atomically: true, encoding: .utf8)
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            let running = Task { await worker.run() }
            let arrived = peer.root.appendingPathComponent("arrived").path
            try #require(try await eventually(within: .seconds(10)) { FileManager.default.fileExists(atPath: arrived) })
            running.cancel()
            await running.value
            let row = try await pool.query(
                "SELECT status, attempts, claim IS NULL AS free, next_attempt_at <= now() AS due FROM outbox")[0]
            #expect(try row.decode("status", as: String.self) == "pending")
            #expect(try row.decode("attempts", as: Int32.self) == 0)
            #expect(try row.decode("free", as: Bool.self) && row.decode("due", as: Bool.self))
            #expect(try await worker.runOnce() == [.delivered])
        }
    }

    @Test("a message whose worker died is sent when its lease ends; retry puts a dead one back")
    func abandonedAndRetried() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, key, _ in
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            let outbox = PostgresOutbox(pool: pool)
            let claimed = try await outbox.claim(limit: 10, lease: .seconds(60), key: key)
            #expect(claimed.count == 1)
            #expect(try await worker.runOnce() == [], "claimed by a worker that then died: not due")
            // The lease ends.
            _ = try await pool.query("UPDATE outbox SET next_attempt_at = now()")
            #expect(try await worker.runOnce() == [.delivered])
            #expect(try Self.received(peer).count == 1)

            _ = try await pool.query("UPDATE outbox SET status = 'dead'")
            let retried = try await outbox.retry(claimed[0].id)
            #expect(retried.status == "pending" && retried.attempts == 0)
            #expect(try await worker.runOnce() == [.delivered])
            await #expect(throws: (any Error).self) { try await outbox.retry(claimed[0].id) }
        }
    }

    @Test(
        "a message retried, pinged or written while its endpoint answers 410 ends dead, either first, many rounds",
        arguments: ["retry", "ping", "event"])
    func putBackWhileGone(_ command: String) async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 3) { pool in
            let outbox = PostgresOutbox(pool: pool)
            // Which landed first shows in the outcome (a retry or ping refused) or in the messages (an event
            // written for the endpoint or not).
            var seen = Set<String>()
            for _ in 0..<200 {
                let message = try await OutboxPruneTests.message(pool, "dead", ago: .zero)
                let endpoint: UUID = try await pool.query("SELECT endpoint_id FROM outbox WHERE id = \(message)")[0]
                    .decode("endpoint_id")
                let outcomes = try await race([
                    {
                        switch command {
                        case "retry": _ = try await outbox.retry(message)
                        case "ping": _ = try await outbox.ping(endpoint)
                        default: _ = try await pool.query("SELECT rbac.enqueue_event('user.deleted', NULL, '{}')")
                        }
                    },
                    { try await outbox.disable(endpoint: endpoint, error: "410 Gone") },
                ])
                #expect([Outcome.success, .refused("not_found")].contains(outcomes[0]) && outcomes[1] == .success)
                let statuses = try await pool.query("SELECT status FROM outbox WHERE endpoint_id = \(endpoint)").map {
                    try $0.decode("status", as: String.self)
                }
                #expect(statuses.allSatisfy { $0 == "dead" }, "\(outcomes): \(statuses)")
                seen.insert("\(outcomes), \(statuses.count) message(s)")
            }
            #expect(seen.count > 1, "the two should land on both sides of each other: \(seen)")
        }
    }

    @Test("retry hurries a message waiting out its backoff, but not one a worker is sending")
    func retriedWhileSent() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, key, _ in
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            let outbox = PostgresOutbox(pool: pool)
            let held = try #require(try await outbox.claim(limit: 10, lease: .seconds(60), key: key).first)
            let row: PostgresQuery = "SELECT o::text AS row FROM outbox o"
            let before: String = try await pool.query(row)[0].decode("row")
            #expect(try await Outcome.of({ _ = try await outbox.retry(held.id) }) == .refused("in_progress"))
            #expect(try await pool.query(row)[0].decode("row") == before, "the refusal changed the message")
            #expect(try await worker.runOnce() == [], "still the first worker's")

            try await outbox.failed(held, error: "timed out", retryIn: .seconds(3600))
            #expect(try await worker.runOnce() == [], "waiting out its backoff")
            let retried = try await outbox.retry(held.id)
            #expect(retried.status == "pending" && retried.attempts == 0)
            #expect(try await worker.runOnce() == [.delivered])
            #expect(try Self.received(peer).count == 1)
        }
    }

    @Test("retry-all puts back every message retry would, as its filters say, and counts the others by why")
    func retriedAll() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, key, endpoint in
            let outbox = PostgresOutbox(pool: pool)
            func couple() async throws -> UUID {
                try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            }
            let sending = try await couple()
            _ = try #require(try await outbox.claim(limit: 10, lease: .seconds(60), key: key).first)
            let (dead, waiting, sent) = (try await couple(), try await couple(), try await couple())
            _ = try await pool.query(
                """
                WITH gone AS (
                    INSERT INTO webhook_endpoints (url, secret_box, disabled_at)
                    VALUES ('https://gone.example.com/', '\\x00', now()) RETURNING id)
                INSERT INTO outbox (event_type, couple_id, payload, channel, endpoint_id, status)
                SELECT 'membership.created', \(dead), '{}'::jsonb, 'webhook', gone.id, 'dead' FROM gone
                UNION ALL SELECT 'invitation.created', \(dead), '{}', 'email', NULL, 'dead'
                """)
            _ = try await pool.query(
                """
                UPDATE outbox SET status = CASE couple_id WHEN \(sent) THEN 'sent' WHEN \(dead) THEN 'dead' ELSE status END,
                                  next_attempt_at = now() + interval '1 hour', attempts = 3
                WHERE endpoint_id = \(endpoint.id) AND couple_id IN (\(dead), \(waiting), \(sent))
                """)
            let rows: PostgresQuery = "SELECT o::text FROM outbox o ORDER BY id"
            /// Retried, then left as they were: for a webhook gone, with the link gone, being sent.
            func counts(_ retries: OutboxRetries) -> [Int] {
                [retries.retried, retries.webhookGone, retries.linkGone, retries.beingSent]
            }
            func state() async throws -> [String] { try await pool.query(rows).map { try $0.decode(column: 0) } }

            let before = try await state()
            let none = try await outbox.retryAll(status: "dead", couple: waiting, event: nil, webhook: nil)
            #expect(counts(none) == [0, 0, 0, 0])
            #expect(try await state() == before, "a filter that matches nothing retries nothing")
            let one = try await outbox.retryAll(status: "dead", couple: nil, event: nil, webhook: endpoint.id)
            #expect(counts(one) == [1, 0, 0, 0])
            let rest = try await outbox.retryAll(status: nil, couple: nil, event: nil, webhook: nil)
            #expect(counts(rest) == [2, 1, 1, 1], "the waiting one, and the one put back, waiting now")
            let retried = try await pool.query(
                """
                SELECT couple_id FROM outbox
                WHERE status = 'pending' AND attempts = 0 AND next_attempt_at <= now() ORDER BY couple_id
                """
            ).map { try $0.decode(column: 0, as: UUID.self) }
            #expect(retried == [dead, waiting].sorted(), "the dead one to the live endpoint, and the waiting one")
            #expect(try await worker.runOnce() == [.delivered, .delivered])
            #expect(try Self.received(peer).count == 2)
            #expect(
                try await pool.count("SELECT count(*) FROM outbox WHERE couple_id = \(sending) AND claim IS NOT NULL")
                    == 1)

            let refused = await #expect(throws: CollaborationError.self) {
                try await outbox.retryAll(status: "sent", couple: nil, event: nil, webhook: nil)
            }
            #expect(refused?.code == .invalidInput)
            let unknown = await #expect(throws: CollaborationError.self) {
                try await outbox.retryAll(status: nil, couple: nil, event: nil, webhook: UUID())
            }
            #expect(unknown?.code == .notFound)
        }
    }

    @Test(
        "a message retried while a worker claims it stays that worker's, whichever lands first, many rounds",
        arguments: ["retry", "retry-all"])
    func retriedWhileClaimed(_ command: String) async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 3) { pool in
            let outbox = PostgresOutbox(pool: pool)
            let key = try DeliveryKey(hex: DeliveryKey.generateHex())
            var seen = Set<[String]>()
            for _ in 0..<200 {
                let message = try await OutboxPruneTests.message(pool, "pending", ago: .zero)
                let endpoint: UUID = try await pool.query("SELECT endpoint_id FROM outbox WHERE id = \(message)")[0]
                    .decode(column: 0)
                let outcomes = try await race(2) { index, go in
                    await go()
                    if index == 1 {
                        let claimed = try await outbox.claim(limit: 10, lease: .seconds(60), key: key)
                        return claimed.contains { $0.id == message } ? "claimed" : "passed over"
                    }
                    guard command == "retry-all" else {
                        switch try await Outcome.of({ _ = try await outbox.retry(message) }) {
                        case .success: return "retried"
                        case .refused(let code): return code
                        }
                    }
                    // Each message has an endpoint of its own.
                    let retries = try await outbox.retryAll(status: nil, couple: nil, event: nil, webhook: endpoint)
                    return retries.retried == 1 ? "retried" : retries.beingSent == 1 ? "in_progress" : "\(retries)"
                }
                seen.insert(outcomes)
                let row = try await pool.query(
                    "SELECT next_attempt_at > now() AS leased, attempts FROM outbox WHERE id = \(message)")[0]
                let leased = try row.decode("leased", as: Bool.self)
                let attempts = try row.decode("attempts", as: Int32.self)
                switch outcomes {
                // Made due while claimed, another worker would take it up beside the first.
                case ["retried", "claimed"], ["in_progress", "claimed"]:
                    #expect(leased && attempts == 1, "\(outcomes)")
                // Retried while the claim was passing it over: due, for the next claim.
                case ["retried", "passed over"]: #expect(!leased && attempts == 0)
                default: Issue.record("\(outcomes)")
                }
            }
            #expect(seen.count > 1, "the two should land on both sides of each other: \(seen)")
        }
    }

    @Test("a worker answering after its lease ran out records nothing, while another holds the message or sent it")
    func lateAnswer() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, key, _ in
            _ = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            let outbox = PostgresOutbox(pool: pool)
            // A worker whose lease ends at once, and which answers only after an operator's retry (its attempts
            // counted afresh) and another worker's claim, and again after that one sent the message.
            let late = try #require(try await outbox.claim(limit: 10, lease: .zero, key: key).first)
            _ = try await outbox.retry(late.id)
            let current = try #require(try await outbox.claim(limit: 10, lease: .seconds(60), key: key).first)
            #expect(current.attempts == late.attempts)
            let row: PostgresQuery = "SELECT o::text AS row, status FROM outbox o"
            let answers: [(String, () async throws -> Void)] = [
                ("a retry", { try await outbox.failed(late, error: "timed out", retryIn: .seconds(1)) }),
                ("a death", { try await outbox.failed(late, error: "gave up", retryIn: nil) }),
                ("a delivery", { try await outbox.delivered(late) }),
            ]
            for status in ["pending", "sent"] {
                if status == "sent" { try await outbox.delivered(current) }
                let before = try await pool.query(row)[0]
                #expect(try before.decode("status", as: String.self) == status)
                for (answer, record) in answers {
                    try await record()
                    let now = try await pool.query(row)[0]
                    #expect(try now.decode("row", as: String.self) == before.decode("row"), "\(answer) recorded late")
                }
            }
            #expect(try await worker.runOnce() == [], "nothing due again")
            #expect(try Self.received(peer).isEmpty)
        }
    }

    @Test("two workers on one database, 1,000 events: every event delivered, none twice")
    func twoWorkers() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, worker, key, _ in
            let owner = try await pool.newUser()
            let couple = try await pool.newCouple(members: [(owner, "owner")])
            _ = try await pool.query(
                """
                WITH u AS (INSERT INTO users (email) SELECT 'u' || i || '-' || gen_random_uuid() || '@example.com'
                           FROM generate_series(1, 999) i RETURNING id)
                INSERT INTO memberships (couple_id, user_id, role) SELECT \(couple), id, 'viewer' FROM u
                """)
            let other = OutboxWorker(
                outbox: PostgresOutbox(pool: pool), http: OutboundHTTP(.init(caFile: peer.caFile)), key: key)
            let outcomes = try await race(2) { index, go in
                await go()
                return try await Self.drain([worker, other][index])
            }
            // A delivery that timed out on a loaded machine is retried: more attempts than events, never more
            // deliveries.
            #expect(outcomes.flatMap { $0 }.filter { $0 == .delivered }.count == 1000)
            let ids = try Self.received(peer).compactMap(\.id)
            #expect(Set(ids).count == 1000, "every event arrived")
            #expect(ids.count - Set(ids).count == 0, "duplicates: \(ids.count - Set(ids).count)")
            #expect(outcomes.allSatisfy { !$0.isEmpty }, "both workers sent some")
        }
    }

    @Test("the queue's gauges count the messages waiting on each channel, and read 0 for an empty one")
    func queueGauges() async throws {
        try await Self.withReceiver(events: ["membership.created"]) { pool, peer, _, key, _ in
            let owner = try await pool.newUser()
            _ = try await pool.newCouple(members: [(owner, "owner"), (try await pool.newUser(), "viewer")])
            let registry = PrometheusCollectorRegistry()
            let worker = OutboxWorker(
                outbox: PostgresOutbox(pool: pool), http: OutboundHTTP(.init(caFile: peer.caFile)), key: key,
                metrics: PrometheusMetricsFactory(registry: registry))
            try await worker.recordQueue()
            var text = registry.emitToString()
            #expect(text.contains(#"rbac_outbox_queue_depth{channel="webhook"} 2"#), "\(text)")
            #expect(text.contains(#"rbac_outbox_queue_depth{channel="email"} 0"#), "\(text)")
            _ = try await Self.drain(worker)
            try await worker.recordQueue()
            text = registry.emitToString()
            #expect(text.contains(#"rbac_outbox_queue_depth{channel="webhook"} 0"#), "\(text)")
        }
    }
}
