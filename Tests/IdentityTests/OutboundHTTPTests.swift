import Foundation
import OutboundHTTP
import TestSupport
import Testing

/// libcurl against a real HTTPS server whose certificate comes from a test CA.
@Suite("Outbound HTTPS and SMTP: verified TLS, timeouts, a size cap, https only, cancellation")
struct OutboundHTTPTests {
    @Test("an answer with its status, headers and max-age, trusting the test CA")
    func answer() async throws {
        try await HTTPSPeer.with { peer in
            try peer.serve("doc.json", Data(#"{"a":1}"#.utf8), headers: ["Cache-Control": "public, max-age=120"])
            let http = OutboundHTTP(.init(caFile: peer.caFile))
            let response = try await http.get(peer.baseURL.appendingPathComponent("doc.json"))
            #expect(response.status == 200)
            #expect(response.body == Array(#"{"a":1}"#.utf8))
            #expect(response.headers["cache-control"] == "public, max-age=120")
            #expect(response.maxAge == .seconds(120))
            #expect(try await http.get(peer.baseURL.appendingPathComponent("missing")).status == 404)

            let posted = try await http.postForm(
                peer.baseURL.appendingPathComponent("token"), [("code", "a b&c"), ("name", "é")])
            let echo = try JSONSerialization.jsonObject(with: Data(posted.body)) as? [String: String]
            #expect(echo?["body"] == "code=a%20b%26c&name=%C3%A9")
            #expect(echo?["content_type"] == "application/x-www-form-urlencoded")
        }
    }

    @Test("refused: a certificate no trusted CA signed, plain http, a slow peer, an answer past the cap")
    func refusals() async throws {
        try await HTTPSPeer.with { peer in
            try peer.serve("doc.json", Data("{}".utf8))
            let url = peer.baseURL.appendingPathComponent("doc.json")
            await #expect(throws: OutboundHTTP.Failure.self) { try await OutboundHTTP().get(url) }

            let http = OutboundHTTP(.init(totalTimeout: .seconds(1), maxResponseBytes: 1 << 20, caFile: peer.caFile))
            let plain = URL(string: "http://127.0.0.1:\(peer.baseURL.port!)/doc.json")!
            let error = await #expect(throws: OutboundHTTP.Failure.self) { try await http.get(plain) }
            #expect(error?.description.contains("only https") == true)

            let slow = await #expect(throws: OutboundHTTP.Failure.self) {
                try await http.get(peer.baseURL.appendingPathComponent("slow"))
            }
            #expect(slow?.description.lowercased().contains("timeout") == true, "\(String(describing: slow))")

            // A patient client: the cap, not a timeout on a loaded machine, must be what refuses it.
            let patient = OutboundHTTP(.init(maxResponseBytes: 1 << 20, caFile: peer.caFile))
            let big = await #expect(throws: OutboundHTTP.Failure.self) {
                try await patient.get(peer.baseURL.appendingPathComponent("big"))
            }
            #expect(big?.description.contains("longer than 1048576 bytes") == true, "\(String(describing: big))")
        }
    }

    /// Timeouts far beyond the time limit: a cancellation that waits for one, or for a goodbye to the peer (SMTP's
    /// QUIT), fails the test.
    @Test(
        "cancelled, a request ends at once while its peer takes its time; so does an email to a silent server",
        .timeLimit(.minutes(1)))
    func cancelled() async throws {
        try await HTTPSPeer.with { peer in
            // Left alone, the peer answers 200 after 5 s, well within the timeout.
            let http = OutboundHTTP(.init(totalTimeout: .seconds(600), caFile: peer.caFile))
            let request = Task { try await http.get(peer.baseURL.appendingPathComponent("slow")) }
            let asked = peer.root.appendingPathComponent("slow.asked").path
            try #require(try await eventually(within: .seconds(10)) { FileManager.default.fileExists(atPath: asked) })
            request.cancel()
            await #expect(throws: CancellationError.self) { try await request.value }
        }

        // A server that takes the connection and never greets: left alone, libcurl waits for the greeting until its
        // connect timeout.
        let listener = try listeningOnLoopback()
        defer { close(listener.socket) }
        let mail = try OutboundMail(
            server: URL(string: "smtp+insecure://127.0.0.1:\(listener.port)")!, timeout: .seconds(600))
        let sending = Task { try await mail.send(from: "a@example.com", to: "b@example.com", message: []) }
        let connection = try await onOwnThread { accept(listener.socket, nil, nil) }
        defer { close(connection) }
        try #require(connection >= 0)
        sending.cancel()
        await #expect(throws: CancellationError.self) { try await sending.value }
    }
}
