import ChildProcess
import Foundation
import Postgres
import TestSupport
import Testing

/// rbac webhooks, outbox and deliver, against a receiver that verifies with the reference implementation.
@Suite("rbac webhooks, outbox and deliver, end to end", .timeLimit(.minutes(2)))
struct DeliveryCommandTests {
    /// A receiver that verifies with the reference implementation, a migrated database, and a delivery key file of
    /// `digits` (two hexadecimal digits) 32 times, for `body` with the URL the receiver takes webhooks at.
    static func withReceiver(
        key digits: String,
        _ body: (
            _ peer: HTTPSPeer, _ run: @escaping ([String]) async throws -> CLITests.Result,
            _ configuration: PostgresConfiguration, _ keyFile: URL, _ url: String
        ) async throws -> Void
    ) async throws {
        try await HTTPSPeer.with(script: "webhook_receiver.py") { peer in
            try await CLITests.withDatabase { run, configuration in
                let keyFile = peer.root.appendingPathComponent("delivery.key")
                try Data("\(String(repeating: digits, count: 32))\n".utf8).write(to: keyFile)
                try await body(
                    peer, run, configuration, keyFile, peer.baseURL.appendingPathComponent("hooks").absoluteString)
            }
        }
    }

    /// `rbac deliver` with `arguments` on `configuration`'s database, running until killed; what it says on stderr
    /// goes to `stderr`.
    static func startWorker(
        _ arguments: [String], on configuration: PostgresConfiguration, stderr: FileHandle = .nullDevice
    ) throws -> Process {
        let worker = Process()
        worker.executableURL = CLITests.executable
        worker.arguments = ["deliver"] + arguments
        worker.environment = ProcessInfo.processInfo.environment.merging(
            ["DATABASE_URL": configuration.connectionString]
        ) { $1 }
        worker.standardOutput = FileHandle.nullDevice
        worker.standardError = stderr
        try worker.run()
        return worker
    }

    @Test("add an endpoint (secret once), deliver what a grant wrote, rotate, retry, remove; bad input exits 2")
    func lifecycle() async throws {
        try await Self.withReceiver(key: "ab") { peer, run, configuration, keyFile, url in
            let keyed = ["--delivery-key-file", keyFile.path]

            let noKey = try await run(["webhooks", "add", "--url", url])
            #expect(noKey.status == 2 && noKey.stderr.contains("no delivery key"), "\(noKey.stderr)")
            // A key file that cannot be used says why, and never what it holds.
            let (binary, wrong) = (
                peer.root.appendingPathComponent("binary.key"), peer.root.appendingPathComponent("wrong.key")
            )
            try Data([0xFF, 0xFE, 0x00, 0x01]).write(to: binary)
            try Data("pa55word\n".utf8).write(to: wrong)
            for (file, refusal) in [
                (binary.path, "the delivery key file \(binary.path) is not text (UTF-8)"),
                (wrong.path, "the delivery key file \(wrong.path): a delivery key is 64 hexadecimal digits"),
                (peer.root.appendingPathComponent("none.key").path, "none.key: there is no such file"),
                (peer.root.path, "\(peer.root.path): it is a directory"),
            ] {
                let result = try await run(["webhooks", "add", "--url", url, "--delivery-key-file", file])
                #expect(result.status == 2 && result.stderr.contains(refusal), "\(result.stderr)")
                #expect(!result.stderr.contains("pa55word"))
            }
            // What was typed is refused first, key or no key.
            let plainNoKey = try await run(["webhooks", "add", "--url", "http://example.com/hooks"])
            #expect(plainNoKey.stderr.contains("must be an https URL"), "\(plainNoKey.stderr)")
            let typoNoKey = try await run(["webhooks", "add", "--url", url, "--event", "member.created"])
            #expect(typoNoKey.stderr.contains("unknown event"), "\(typoNoKey.stderr)")
            let plain = try await run(["webhooks", "add", "--url", "http://example.com/hooks"] + keyed)
            #expect(plain.status == 2 && plain.stderr.contains("must be an https URL"), "\(plain.stderr)")
            for refused in [
                "https://example.com/hooks#top", "https://", "https://hooks:pa55word@example.com/",
                "https://hooks:pa55word@exa mple.com/", "https://example.com:99999/hooks",
            ] {
                let result = try await run(["webhooks", "add", "--url", refused] + keyed)
                #expect(result.status == 2 && result.stderr.contains("a webhook URL must"), "\(result.stderr)")
                #expect(!result.stderr.contains("pa55word"), "a password in a URL is never repeated")
            }
            let mailed = ["deliver", "--once", "--mail-from", "rbac@example.com", "--smtp-url"]
            for smtp in ["smtp://rbac:pa55word@mail.example.com:587", "smtp://rbac:pa55word@"] {
                let result = try await run(mailed + [smtp] + keyed)
                #expect(result.status == 2 && result.stderr.contains("--smtp-url"), "\(result.stderr)")
                #expect(!result.stderr.contains("pa55word"), "a password in a URL is never repeated")
            }
            // A CR LF pair is one Character to Swift, and a header to a mail server.
            for (from, refusal) in [
                ("rbac@example.com\r\nBcc: eve@example.com", "a sender must not hold control characters"),
                ("rbac\n@example.com", "a sender must not hold control characters"),
                ("no address", "a sender must name an email address: \"no address\" is not an email address"),
                ("Eve <eve@localhost>", "a sender must name an email address: \"eve@localhost\""),
            ] {
                let result = try await run(
                    ["deliver", "--once", "--mail-from", from, "--smtp-url", "smtp://mail.example.com"] + keyed)
                #expect(
                    result.status == 2 && result.stderr.contains("--mail-from: \(refusal)"), "\(result.stderr)")
            }
            let long = try await run(
                ["webhooks", "add", "--url", url + String(repeating: "a", count: 2000)] + keyed)
            #expect(long.status == 2 && long.stderr.contains("at most 2000 characters"), "\(long.stderr)")
            let typo = try await run(["webhooks", "add", "--url", url, "--event", "member.created"] + keyed)
            #expect(typo.status == 2 && typo.stderr.contains("unknown event"), "\(typo.stderr)")
            #expect(try CLITests.jsonArray(try await run(["webhooks", "list", "--json"])).isEmpty)

            // Nothing sealed yet: any key will do, and the first to seal becomes the database's.
            let unsealed = try CLITests.json(try await run(["delivery-key", "check", "--json"] + keyed))
            #expect(unsealed["matches"] as? Bool == true && unsealed["sealed"] as? Bool == false, "\(unsealed)")

            // Its scheme in capitals, as someone may type it: stored in lower case, as the table's check wants.
            let typed = "HTTPS" + url.dropFirst("https".count)
            let added = try CLITests.json(try await run(["webhooks", "add", "--url", typed, "--json"] + keyed))
            let secret = try #require(added["secret"] as? String)
            let id = try #require((added["endpoint"] as? [String: Any])?["id"] as? String)
            #expect(secret.hasPrefix("whsec_"))
            try Data(secret.utf8).write(to: peer.root.appendingPathComponent("secret"))
            let listed = try await run(["webhooks", "list"])
            #expect(listed.stdout.contains(url) && !listed.stdout.contains(secret), "never the secret")

            let couple = try await CLITests.createCouple(run)
            let delivered = try CLITests.json(
                try await run(["deliver", "--once", "--ca-file", peer.caFile, "--json"] + keyed))
            #expect(
                delivered["delivered"] as? Int == 3, "its new owner, the couple and the membership: \(delivered)")
            let received = try String(
                contentsOf: peer.root.appendingPathComponent("received.jsonl"), encoding: .utf8)
            #expect(!received.contains(#""verified": false"#) && received.contains(#""verified": true"#))
            #expect(
                received.contains("user.created") && received.contains("couple.created")
                    && received.contains("membership.created"))

            let rotated = try CLITests.json(try await run(["webhooks", "rotate-secret", id, "--json"] + keyed))
            #expect((rotated["secret"] as? String).map { $0 != secret && $0.hasPrefix("whsec_") } == true)
            let kept = try #require((rotated["endpoint"] as? [String: Any])?["previous_secret_until"] as? String)
            let until = try #require(try? Date(kept, strategy: .iso8601))
            #expect(abs(until.timeIntervalSinceNow - 86_400) < 60, "the old secret signs for a day: \(kept)")
            #expect(try await run(["webhooks", "list"]).stdout.contains(kept), "the listing says until when")
            let leaked = try CLITests.json(
                try await run(["webhooks", "rotate-secret", id, "--keep-old", "0m", "--json"] + keyed))
            #expect((leaked["endpoint"] as? [String: Any])?["previous_secret_until"] == nil, "\(leaked)")
            let tooLong = try await run(["webhooks", "rotate-secret", id, "--keep-old", "31d"] + keyed)
            #expect(tooLong.status == 2 && tooLong.stderr.contains("--keep-old must be at most 30d, not 31d"))

            let sent = try CLITests.jsonArray(try await run(["outbox", "list", "--status", "sent", "--json"]))
            let message = try #require(sent.first?["id"] as? String)
            let again = try await run(["outbox", "retry", message])
            #expect(again.status == 3 && again.stderr.contains("a sent one is not sent again"), "\(again.stderr)")
            #expect(try await run(["outbox", "list", "--status", "lost"]).status == 2)
            // Paged two at a time, newest first, each page after the place the one before's hint names.
            let every = try CLITests.jsonArray(try await run(["outbox", "list", "--json"])).map {
                $0["id"] as? String
            }
            var paged: [String?] = []
            var after: [String] = []
            while paged.count <= every.count {
                let page = try await run(["outbox", "list", "--limit", "2", "--json"] + after)
                paged += try CLITests.jsonArray(page).map { $0["id"] as? String }
                guard let place = try CLITests.next("next_after", of: page) as? String else { break }
                after = ["--after", place]
            }
            #expect(every.count > 2 && paged == every, "\(paged) against \(every)")
            let unknownPlace = try await run(["outbox", "list", "--limit", "2", "--after", UUID().uuidString])
            #expect(unknownPlace.status == 3 && unknownPlace.stderr.contains("no message"), "\(unknownPlace)")
            #expect(try await run(["outbox", "list", "--after", message]).status == 2, "--after needs --limit")
            // Everything sent: nothing to put back; sent ones are not asked for.
            let nothing = try await run(["outbox", "retry-all", "--webhook", id])
            #expect(nothing.stdout.contains("Put 0 message(s) back in the queue, due now."), "\(nothing.stdout)")
            let sentAgain = try await run(["outbox", "retry-all", "--status", "sent"])
            #expect(sentAgain.status == 2 && sentAgain.stderr.contains("a sent message is not sent again"))
            let nowhere = try await run(["outbox", "retry-all", "--webhook", UUID().uuidString])
            #expect(nowhere.status == 3 && nowhere.stderr.contains("does not exist"), "\(nowhere.stderr)")
            let toIt = try CLITests.jsonArray(try await run(["outbox", "list", "--webhook", id, "--json"]))
            #expect(!toIt.isEmpty && toIt.allSatisfy { $0["endpoint_id"] as? String == id }, "\(toIt)")
            let toNone = try await run(["outbox", "list", "--webhook", UUID().uuidString, "--json"])
            #expect(try CLITests.jsonArray(toNone).isEmpty, "another endpoint's messages only")
            let created = try CLITests.jsonArray(
                try await run(["outbox", "list", "--couple", couple, "--event", "couple.created", "--json"]))
            #expect(created.map { $0["event_type"] as? String } == ["couple.created"], "\(created)")
            #expect(created.first?["delivered_at"] is String, "a sent message says when it was delivered")
            let elsewhere = try await run(["outbox", "list", "--couple", UUID().uuidString, "--json"])
            #expect(try CLITests.jsonArray(elsewhere).isEmpty, "another couple's messages only")
            let unknown = try await run(["outbox", "list", "--event", "member.created"])
            #expect(unknown.status == 2 && unknown.stderr.contains("unknown event \"member.created\""))
            let messages = try await run(["outbox", "list", "--couple", couple]).stdout
            #expect(
                messages.contains(" DELIVERED ") && messages.contains(" membership.created  webhook  sent "),
                "\(messages)")

            // The database's key is the first that sealed: another is refused, until a rotation makes it so.
            let otherFile = peer.root.appendingPathComponent("other.key")
            try Data("\(String(repeating: "cd", count: 32))\n".utf8).write(to: otherFile)
            let other = ["--delivery-key-file", otherFile.path]
            let checked = try CLITests.json(try await run(["delivery-key", "check", "--json"] + keyed))
            #expect(checked["matches"] as? Bool == true && checked["sealed"] as? Bool == true, "\(checked)")
            // Through a pipe, as a secret store hands a key over: --delivery-key-file <(pass show rbac/key).
            let piped = try await ChildProcess.run(
                "/bin/bash",
                [
                    "-c", #"exec "$0" delivery-key check --delivery-key-file <(printf '%s' "$1")"#,
                    CLITests.executable.path, String(repeating: "ab", count: 32),
                ],
                environment: ProcessInfo.processInfo.environment.merging(
                    ["DATABASE_URL": configuration.connectionString]) { $1 })
            #expect(piped.output.contains("This delivery key is the database's."), "\(piped.errorOutput)")
            let foreign = try await run(["delivery-key", "check"] + other)
            #expect(
                foreign.status == 4 && foreign.stderr.contains("this delivery key is not the one this database's"),
                "\(foreign.stderr)")
            #expect(try await run(["webhooks", "add", "--url", url] + other).status == 4)
            let moved = try CLITests.json(
                try await run(["delivery-key", "rotate", "--old-key-file", keyFile.path, "--json"] + other))
            #expect(moved["webhook_secrets"] as? Int == 1 && moved["unopened"] as? Int == 0, "\(moved)")
            #expect(try await run(["users", "add", "--email", "due@example.com"]).status == 0)
            let stale = try await run(["deliver", "--once", "--ca-file", peer.caFile] + keyed)
            #expect(stale.status == 4 && stale.stderr.contains("delivery-key"), "\(stale.stderr)")
            #expect(try await run(["delivery-key", "check"] + other).status == 0)
            let renewed = try CLITests.json(
                try await run(["deliver", "--once", "--ca-file", peer.caFile, "--json"] + other))
            #expect(renewed["delivered"] as? Int == 1, "left due for the new key: \(renewed)")
            let wrongOld = try await run(["delivery-key", "rotate", "--old-key-file", keyFile.path] + keyed)
            #expect(wrongOld.status == 4 && wrongOld.stderr.contains("the old delivery key is not"))
            // The database's key lost: another takes over without it, each endpoint with a new secret.
            let unconfirmed = try await run(["delivery-key", "reset"] + keyed)
            #expect(unconfirmed.status == 2 && unconfirmed.stderr.contains("add --yes"), "\(unconfirmed.stderr)")
            let current = try await run(["delivery-key", "reset", "--yes"] + other)
            #expect(current.status == 4 && current.stderr.contains("is the database's already"))
            let reset = try await run(["delivery-key", "reset", "--yes"] + keyed)
            #expect(reset.status == 0 && reset.stdout.contains("\(id) \(url)\nwhsec_"), "\(reset.stdout)")
            let renewedSecret = try #require(
                reset.stdout.split(separator: "\n").first { $0.hasPrefix("whsec_") }.map(String.init))
            #expect(try await run(["delivery-key", "check"] + keyed).status == 0)

            // Its events changed; a URL refused as `add` refuses it.
            let narrowed = try await run(
                ["webhooks", "edit", id, "--event", "couple.created", "--event", "couple.created", "--json"])
            #expect(try CLITests.json(narrowed)["event_types"] as? [String] == ["couple.created"], "\(narrowed)")
            // A ping reaches it though it takes couple.created alone, signed as every event is: by the secret
            // the reset gave it, which the receiver now holds.
            try Data(renewedSecret.utf8).write(to: peer.root.appendingPathComponent("secret"))
            let ping = try CLITests.json(try await run(["webhooks", "ping", id, "--json"]))
            #expect(ping["event_type"] as? String == "webhook.ping" && ping["status"] as? String == "pending")
            let pinged = try CLITests.json(
                try await run(["deliver", "--once", "--ca-file", peer.caFile, "--json"] + keyed))
            #expect(pinged["delivered"] as? Int == 1, "\(pinged)")
            let pings = try String(contentsOf: peer.root.appendingPathComponent("received.jsonl"), encoding: .utf8)
                .split(separator: "\n").filter { $0.contains(#""id": "\#(ping["id"] as? String ?? "?")""#) }
            #expect(
                pings.count == 1 && pings[0].contains(#""type": "webhook.ping""#)
                    && pings[0].contains(#""verified": true"#), "\(pings)")
            #expect(try await run(["webhooks", "ping", UUID().uuidString]).status == 3)
            #expect(try await run(["webhooks", "ping", "hooks"]).status == 2)
            let insecure = try await run(["webhooks", "edit", id, "--url", "http://example.com/hooks"])
            #expect(insecure.status == 2 && insecure.stderr.contains("must be an https URL"), "\(insecure.stderr)")
            let widened = try CLITests.json(try await run(["webhooks", "edit", id, "--every-event", "--json"]))
            #expect((widened["event_types"] as? [String])?.isEmpty == true, "\(widened)")
            #expect(try await run(["webhooks", "edit", id]).status == 2, "nothing to change")
            #expect(try await run(["webhooks", "edit", UUID().uuidString, "--enable"]).status == 3)
            #expect(try await run(["webhooks", "list"]).stdout.contains("  every event"))

            // Its receiver gone (410), what it was sent dies; enabled again, retry-all puts it back.
            try "410\n".write(to: peer.root.appendingPathComponent("statuses"), atomically: true, encoding: .utf8)
            #expect(try await run(["users", "add", "--email", "gone@example.com"]).status == 0)
            #expect(try await run(["deliver", "--once", "--ca-file", peer.caFile] + keyed).status == 0)
            let refused = try await run(["outbox", "retry-all", "--webhook", id])
            #expect(
                refused.stdout.contains(
                    "Put 0 message(s) back in the queue, due now; left as they were: 1 for webhooks that answered "
                        + "410 Gone (rbac webhooks edit ID --enable)."), "\(refused.stdout)")
            let gonePing = try await run(["webhooks", "ping", id])
            #expect(
                gonePing.status == 3
                    && gonePing.stderr.contains("cannot ping webhook \(id), which answered 410 Gone"),
                "\(gonePing.stderr)")
            let failing = try CLITests.jsonArray(try await run(["webhooks", "list", "--json"]))
            #expect(failing.first?["dead"] as? Int == 1 && failing.first?["waiting"] as? Int == 0, "\(failing)")
            #expect(failing.first?["url"] as? String == url, "the endpoint's own fields beside")
            #expect(try await run(["webhooks", "edit", id, "--enable"]).status == 0)
            let back = try CLITests.json(try await run(["outbox", "retry-all", "--status", "dead", "--json"]))
            #expect(back["retried"] as? Int == 1 && back["webhook_gone"] as? Int == 0, "\(back)")
            let waiting = try await run(["webhooks", "list"]).stdout
            #expect(
                waiting.contains(" WAITING  DEAD ") && waiting.contains("  every event  1        0\n"), "\(waiting)"
            )
            let resent = try CLITests.json(
                try await run(["deliver", "--once", "--ca-file", peer.caFile, "--json"] + keyed))
            #expect(resent["delivered"] as? Int == 1, "\(resent)")

            #expect(try await run(["webhooks", "remove", id]).status == 0)
            #expect(try CLITests.jsonArray(try await run(["webhooks", "list", "--json"])).isEmpty)
            let log = try await run(["audit", "--operator", "--json"])
            #expect(log.stdout.contains("webhook.insert") && !log.stdout.contains("secret_box"))
            let table = try await run(["audit", "--operator"]).stdout
            #expect(table.contains(" webhook.insert ") && table.contains(" url=\(url)"), "where messages go")
            #expect(table.contains(" event_types couple.created→\n"), "\(table)")
            #expect(table.contains(" webhook.delete ") && !table.contains(secret) && !table.contains(renewedSecret))
        }
    }

    @Test("ping --wait says how it went: taken, exit 0; refused, with the endpoint's answer, or not sent in time, 1")
    func pingWaited() async throws {
        try await Self.withReceiver(key: "ef") { peer, run, configuration, keyFile, url in
            let added = try CLITests.json(
                try await run(["webhooks", "add", "--url", url, "--json", "--delivery-key-file", keyFile.path]))
            let id = try #require((added["endpoint"] as? [String: Any])?["id"] as? String)
            try Data(try #require(added["secret"] as? String).utf8).write(
                to: peer.root.appendingPathComponent("secret"))
            #expect(try await run(["webhooks", "ping", id, "--wait", "0s"]).status == 2)

            let unsent = try await run(["webhooks", "ping", id, "--wait", "1s"])
            #expect(
                unsent.status == 1
                    && unsent.stdout.contains("within 1s: is rbac serve or rbac deliver running on this database?"),
                "\(unsent.stdout)")
            // Sent now, so that the worker below has only the next ping to send, and the 503 reaches that one.
            let flushed = try CLITests.json(
                try await run([
                    "deliver", "--once", "--ca-file", peer.caFile, "--json", "--delivery-key-file", keyFile.path,
                ]))
            #expect(flushed["delivered"] as? Int == 1, "\(flushed)")

            let worker = try Self.startWorker(
                ["--delivery-key-file", keyFile.path, "--ca-file", peer.caFile], on: configuration)
            defer {
                kill(worker.processIdentifier, SIGKILL)
                worker.waitUntilExit()
            }
            let taken = try await run(["webhooks", "ping", id, "--wait", "30s", "--json"])
            let status = try CLITests.json(taken)["status"] as? String
            #expect(taken.status == 0 && status == "sent", "\(taken)")
            try "503\n".write(to: peer.root.appendingPathComponent("statuses"), atomically: true, encoding: .utf8)
            let refused = try await run(["webhooks", "ping", id, "--wait", "30s"])
            #expect(
                refused.status == 1 && refused.stdout.contains("Webhook \(id) did not take webhook.ping ")
                    && refused.stdout.contains(": the endpoint answered 503"), "\(refused.stdout)")
            let pings = try CLITests.jsonArray(
                try await run(["outbox", "list", "--event", "webhook.ping", "--json"]))
            #expect(pings.map { $0["status"] as? String } == ["pending", "sent", "sent"], "\(pings)")
        }
    }

    /// A worker is a service: started while the database is down it waits, as it does when the database goes down
    /// under it (the reliability suite restarts PostgreSQL under workers started at random); with --once it exits 5.
    /// A SIGTERM sent as soon as it has said so stops it cleanly; 40 rounds, since a signal that came before the
    /// worker trapped it would end the process in a few rounds of a hundred.
    @Test("a worker started while the database cannot be reached says so once, waits, and stops on SIGTERM")
    func startedWithoutDatabase() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-deliver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let keyFile = root.appendingPathComponent("delivery.key")
        try Data("\(String(repeating: "ef", count: 32))\n".utf8).write(to: keyFile)
        let offline = "postgres://nobody@127.0.0.1:1/none"

        let once = try await CLITests.rbac(
            ["deliver", "--once", "--delivery-key-file", keyFile.path], database: offline)
        #expect(once.status == 5 && once.stderr.hasPrefix("rbac: cannot connect to the database"), "\(once)")

        for round in 1...40 {
            let log = root.appendingPathComponent("stderr-\(round)")
            try #require(FileManager.default.createFile(atPath: log.path, contents: nil))
            let worker = Process()
            worker.executableURL = CLITests.executable
            worker.arguments = ["deliver", "--delivery-key-file", keyFile.path]
            worker.environment = ProcessInfo.processInfo.environment.merging(["DATABASE_URL": offline]) { $1 }
            worker.standardOutput = FileHandle.nullDevice
            worker.standardError = try FileHandle(forWritingTo: log)
            try worker.run()
            defer { if worker.isRunning { kill(worker.processIdentifier, SIGKILL) } }
            func said() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
            let paused = try await eventually(within: .seconds(30), every: .milliseconds(5)) {
                said().hasSuffix("\n")
            }
            try #require(paused, "round \(round): the worker said nothing within 30 s")
            try #require(worker.isRunning, "round \(round): it exited: \(said())")
            kill(worker.processIdentifier, SIGTERM)
            worker.waitUntilExit()
            try #require(
                worker.terminationReason == .exit && worker.terminationStatus == 0,
                "round \(round): \(worker.terminationReason == .exit ? "exit" : "signal") \(worker.terminationStatus)")
            let lines = said().split(separator: "\n")
            try #require(lines.count == 1 && lines[0].hasPrefix("rbac: outbox delivery paused: "), "\(lines)")
            try #require(lines[0].contains("127.0.0.1"), "it names the database it waits for: \(lines)")
        }
    }

    /// Signals are trapped from the start: one that comes while the worker is still connecting stops it, with 0,
    /// once the connection gives up, rather than ending the process by the signal's default. The database here
    /// takes the connection and never answers; the worker is signalled once its connection is taken.
    @Test("a worker signalled while it is still connecting stops with 0 once the connection gives up")
    func signalledWhileConnecting() async throws {
        let (listener, port) = try listeningOnLoopback()
        defer { close(listener) }
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-deliver-\(UUID()).key")
        try Data("\(String(repeating: "ef", count: 32))\n".utf8).write(to: keyFile)
        defer { try? FileManager.default.removeItem(at: keyFile) }

        let worker = Process()
        worker.executableURL = CLITests.executable
        worker.arguments = ["deliver", "--delivery-key-file", keyFile.path]
        worker.environment = ProcessInfo.processInfo.environment.merging([
            "DATABASE_URL": "postgres://nobody@127.0.0.1:\(port)/none?connect_timeout=2"
        ]) { $1 }
        worker.standardOutput = FileHandle.nullDevice
        worker.standardError = FileHandle.nullDevice
        try worker.run()
        defer { if worker.isRunning { kill(worker.processIdentifier, SIGKILL) } }
        var taken: Int32 = -1
        defer { if taken >= 0 { close(taken) } }
        let connecting = try await eventually(within: .seconds(30), every: .milliseconds(5)) {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 0) == 1 else { return false }
            taken = accept(listener, nil, nil)
            return true
        }
        try #require(connecting && taken >= 0, "the worker never connected")
        #expect(worker.isRunning)
        kill(worker.processIdentifier, SIGTERM)
        worker.waitUntilExit()
        #expect(
            worker.terminationReason == .exit && worker.terminationStatus == 0,
            "\(worker.terminationReason == .exit ? "exit" : "signal") \(worker.terminationStatus)")
    }

    /// SIGKILL: the message waits out the dead worker's lease. SIGTERM: the worker stops, exits 0 (with --once,
    /// 143: it did not finish), and gives the message back, due at once with the attempt not counted.
    @Test(
        "a worker killed or stopped mid-delivery: after restart the message is delivered, with the same id",
        arguments: [(SIGKILL, false), (SIGTERM, false), (SIGTERM, true)])
    func killedMidDelivery(_ signal: Int32, once: Bool) async throws {
        try await Self.withReceiver(key: "cd") { peer, run, configuration, keyFile, url in
            let keyed = ["--delivery-key-file", keyFile.path, "--ca-file", peer.caFile]
            let added = try CLITests.json(
                try await run([
                    "webhooks", "add", "--url", url, "--event", "membership.created", "--json",
                    "--event", "membership.created", "--delivery-key-file", keyFile.path,
                ]))
            let endpoint = try #require(added["endpoint"] as? [String: Any])
            #expect(endpoint["event_types"] as? [String] == ["membership.created"], "an event named twice is one")
            try Data(try #require(added["secret"] as? String).utf8).write(
                to: peer.root.appendingPathComponent("secret"))
            // The receiver holds the first delivery: the worker is mid-request when it is killed.
            try Data("sleep 60\n".utf8).write(to: peer.root.appendingPathComponent("statuses"))
            _ = try await CLITests.createCouple(run)

            let said = peer.root.appendingPathComponent("worker.stderr")
            try #require(FileManager.default.createFile(atPath: said.path, contents: nil))
            let worker = try Self.startWorker(
                keyed + (once ? ["--once", "--json"] : []), on: configuration,
                stderr: try FileHandle(forWritingTo: said))
            let arrived = peer.root.appendingPathComponent("arrived")
            // A whole line: the receiver creates the file before the line reaches it.
            func arrivedLines() -> String? {
                (try? String(contentsOf: arrived, encoding: .utf8)).flatMap { $0.hasSuffix("\n") ? $0 : nil }
            }
            _ = try await eventually(within: .seconds(30), every: .milliseconds(20)) { arrivedLines() != nil }
            let first = try #require(arrivedLines(), "no delivery arrived within 30 s")
            kill(worker.processIdentifier, signal)
            worker.waitUntilExit()
            let killed = signal == SIGKILL
            #expect(
                killed
                    ? worker.terminationReason == .uncaughtSignal
                    : worker.terminationReason == .exit && worker.terminationStatus == (once ? 128 + SIGTERM : 0))
            if once {
                // What a script reads, as it reads a failure: JSON, since it asked for JSON.
                let stopped = try String(contentsOf: said, encoding: .utf8)
                #expect(stopped == #"{"stopped_by":"SIGTERM"}"# + "\n", "\(stopped)")
            }

            let database = try await PostgresConnection.connect(configuration)
            let claimed = try await database.query(
                "SELECT status, attempts, next_attempt_at > now() AS leased FROM outbox")
            #expect(claimed.count == 1)
            #expect(try claimed[0].decode("status", as: String.self) == "pending", "not sent, not lost")
            #expect(try claimed[0].decode("leased", as: Bool.self) == killed, "held only by a dead worker's lease")
            #expect(try claimed[0].decode("attempts", as: Int32.self) == (killed ? 1 : 0))
            // The lease ends (a minute, in life).
            if killed { _ = try await database.execute("UPDATE outbox SET next_attempt_at = now()") }
            let restarted = try CLITests.json(try await run(["deliver", "--once", "--json"] + keyed))
            #expect(restarted["delivered"] as? Int == 1, "\(restarted)")
            let sent: String = try await database.query("SELECT status FROM outbox")[0].decode(column: 0)
            #expect(sent == "sent")
            await database.close()

            let ids = try String(contentsOf: arrived, encoding: .utf8).split(separator: "\n")
            #expect(ids.count == 2 && ids[0] == ids[1], "both attempts carry one webhook-id: \(ids)")
            #expect(first.split(separator: "\n") == [ids[0]])
            let received = try String(
                contentsOf: peer.root.appendingPathComponent("received.jsonl"), encoding: .utf8)
            #expect(received.contains(#""verified": true"#) && received.contains(String(ids[0])))
        }
    }
}
