import ChildProcess
import Foundation
import Postgres
import TestSupport
import Testing

/// rbac webhooks, outbox and deliver, against a receiver that verifies with the reference implementation.
@Suite("rbac webhooks, outbox and deliver, end to end", .timeLimit(.minutes(2)))
struct DeliveryCommandTests {
    @Test("add an endpoint (secret once), deliver what a grant wrote, rotate, retry, remove; bad input exits 2")
    func lifecycle() async throws {
        try await HTTPSPeer.with(script: "webhook_receiver.py") { peer in
            try await TestDatabase.withFresh { configuration in
                let keyFile = peer.root.appendingPathComponent("delivery.key")
                try Data("\(String(repeating: "ab", count: 32))\n".utf8).write(to: keyFile)
                let run = { (arguments: [String]) in
                    try await CLITests.rbac(arguments, database: configuration.connectionString)
                }
                let keyed = ["--delivery-key-file", keyFile.path]
                #expect(try await run(["migrate"]).status == 0)
                let url = peer.baseURL.appendingPathComponent("hooks").absoluteString

                let noKey = try await run(["webhooks", "add", "--url", url])
                #expect(noKey.status == 2 && noKey.stderr.contains("no delivery key"), "\(noKey.stderr)")
                let plain = try await run(["webhooks", "add", "--url", "http://example.com/hooks"] + keyed)
                #expect(plain.status == 2 && plain.stderr.contains("must be an https URL"), "\(plain.stderr)")
                let typo = try await run(["webhooks", "add", "--url", url, "--event", "member.created"] + keyed)
                #expect(typo.status == 2 && typo.stderr.contains("unknown event"), "\(typo.stderr)")
                #expect(try CLITests.jsonArray(try await run(["webhooks", "list", "--json"])).isEmpty)

                let added = try CLITests.json(try await run(["webhooks", "add", "--url", url, "--json"] + keyed))
                let secret = try #require(added["secret"] as? String)
                let id = try #require((added["endpoint"] as? [String: Any])?["id"] as? String)
                #expect(secret.hasPrefix("whsec_"))
                try Data(secret.utf8).write(to: peer.root.appendingPathComponent("secret"))
                let listed = try await run(["webhooks", "list"])
                #expect(listed.stdout.contains(url) && !listed.stdout.contains(secret), "never the secret")

                _ = try await CLITests.createCouple(run)
                let delivered = try CLITests.json(
                    try await run(["deliver", "--once", "--ca-file", peer.caFile, "--json"] + keyed))
                #expect(delivered["delivered"] as? Int == 1, "\(delivered)")
                let received = try String(
                    contentsOf: peer.root.appendingPathComponent("received.jsonl"), encoding: .utf8)
                #expect(received.contains(#""verified": true"#) && received.contains("membership.created"))

                let rotated = try CLITests.json(try await run(["webhooks", "rotate-secret", id, "--json"] + keyed))
                #expect((rotated["secret"] as? String).map { $0 != secret && $0.hasPrefix("whsec_") } == true)

                let sent = try CLITests.jsonArray(try await run(["outbox", "list", "--status", "sent", "--json"]))
                let message = try #require(sent.first?["id"] as? String)
                let again = try await run(["outbox", "retry", message])
                #expect(again.status == 3 && again.stderr.contains("a sent one is not sent again"), "\(again.stderr)")
                #expect(try await run(["outbox", "list", "--status", "lost"]).status == 2)

                #expect(try await run(["webhooks", "remove", id]).status == 0)
                #expect(try CLITests.jsonArray(try await run(["webhooks", "list", "--json"])).isEmpty)
                let log = try await run(["audit", "--operator", "--json"])
                #expect(log.stdout.contains("webhook.insert") && !log.stdout.contains("secret_box"))
            }
        }
    }
}
