import CCurl
import Foundation

/// Email through libcurl's SMTP client, TLS by the system's OpenSSL: `smtp://host:587` requires STARTTLS,
/// `smtps://host:465` is TLS from the start, and `smtp+insecure://` (tests, a relay on localhost) is plain SMTP,
/// only when asked for by name. Each message is a `Transfer`, like `OutboundHTTP`'s requests.
public struct OutboundMail: Sendable {
    public let server: URL
    let username: String?
    let password: String?
    let caFile: String?
    let timeout: Duration

    /// Why a message was not taken: the server's reply code when it gave one (`permanent` for 5xx: do not retry).
    public struct Failure: Error, CustomStringConvertible {
        public let code: Int?
        public let description: String
        public var permanent: Bool { (500..<600).contains(code ?? 0) }

        public init(code: Int?, description: String) {
            self.code = code
            self.description = description
        }
    }

    public init(
        server: URL, username: String? = nil, password: String? = nil, caFile: String? = nil,
        timeout: Duration = .seconds(30)
    ) throws(Failure) {
        guard ["smtp", "smtps", "smtp+insecure"].contains(server.scheme?.lowercased() ?? ""), server.host != nil
        else { throw Failure(code: nil, description: "the mail server must be smtp://, smtps:// or smtp+insecure://") }
        self.server = server
        self.username = username
        self.password = password
        self.caFile = caFile
        self.timeout = timeout
    }

    /// Sends `message` (headers and body, CRLF line ends) from `from` to `to` (bare addresses). Throws `Failure`
    /// when the server did not take it, `CancellationError` when the task was cancelled before it had.
    public func send(from: String, to: String, message: [UInt8]) async throws {
        let failure = try await Transfer.run(label: "rbac.outbound-mail") {
            try sendBlocking(from: from, to: to, message: message, $0)
        }
        if let failure { throw failure }
    }

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// The message, read by libcurl a piece at a time.
    private final class Reader {
        let bytes: [UInt8]
        var offset = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    private static let read: rbac_curl_data_callback = { buffer, size, count, context in
        let reader = Unmanaged<Reader>.fromOpaque(context!).takeUnretainedValue()
        let length = min(size * count, reader.bytes.count - reader.offset)
        guard length > 0, let buffer else { return 0 }
        reader.bytes.withUnsafeBufferPointer { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + reader.offset, byteCount: length)
        }
        reader.offset += length
        return length
    }

    private func sendBlocking(from: String, to: String, message: [UInt8], _ transfer: Transfer) throws -> Failure? {
        _ = Self.globalInit
        guard let curl = curl_easy_init() else { return Failure(code: nil, description: "libcurl could not start") }
        defer { curl_easy_cleanup(curl) }
        let scheme = server.scheme!.lowercased()
        var components = URLComponents(url: server, resolvingAgainstBaseURL: false)!
        components.scheme = scheme == "smtp+insecure" ? "smtp" : scheme
        components.user = nil
        components.password = nil
        let recipients = curl_slist_append(nil, "<\(to)>")
        defer { curl_slist_free_all(recipients) }
        let reader = Reader(message)
        let milliseconds = Int(timeout.components.seconds * 1000)

        var code = rbac_curl_set_string(curl, CURLOPT_URL, components.string!)
        let settings: [(CURLoption, Int)] = [
            (CURLOPT_NOSIGNAL, 1), (CURLOPT_UPLOAD, 1), (CURLOPT_SSL_VERIFYPEER, 1), (CURLOPT_SSL_VERIFYHOST, 2),
            (CURLOPT_USE_SSL, scheme == "smtp+insecure" ? Int(CURLUSESSL_NONE.rawValue) : Int(CURLUSESSL_ALL.rawValue)),
            (CURLOPT_CONNECTTIMEOUT_MS, min(milliseconds, 10_000)), (CURLOPT_TIMEOUT_MS, milliseconds),
        ]
        for (option, value) in settings where code == CURLE_OK { code = rbac_curl_set_long(curl, option, value) }
        if code == CURLE_OK { code = rbac_curl_set_string(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps") }
        if code == CURLE_OK { code = rbac_curl_set_string(curl, CURLOPT_MAIL_FROM, "<\(from)>") }
        if code == CURLE_OK { code = rbac_curl_set_pointer(curl, CURLOPT_MAIL_RCPT, recipients) }
        if code == CURLE_OK, let caFile { code = rbac_curl_set_string(curl, CURLOPT_CAINFO, caFile) }
        if code == CURLE_OK, let username { code = rbac_curl_set_string(curl, CURLOPT_USERNAME, username) }
        if code == CURLE_OK, let password { code = rbac_curl_set_string(curl, CURLOPT_PASSWORD, password) }
        if code == CURLE_OK { code = rbac_curl_set_offset(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(message.count)) }
        if code == CURLE_OK { code = rbac_curl_set_callback(curl, CURLOPT_READFUNCTION, Self.read) }
        if code == CURLE_OK {
            code = rbac_curl_set_pointer(curl, CURLOPT_READDATA, Unmanaged.passUnretained(reader).toOpaque())
        }
        do {
            if code == CURLE_OK { code = try withExtendedLifetime(reader) { try transfer.perform(curl) } }
        } catch let failure as Transfer.Failure {
            return Failure(code: nil, description: "\(components.host ?? "the mail server"): \(failure)")
        }
        guard code != CURLE_OK else { return nil }
        var reply = 0
        _ = rbac_curl_response_code(curl, &reply)
        // A login refused or required (530, 534, 535, 538) says nothing of the recipient: the server's settings
        // are wrong, and the message waits for them to be put right rather than dying.
        let aboutLogin = code == CURLE_LOGIN_DENIED || [530, 534, 535, 538].contains(reply)
        return Failure(
            code: aboutLogin || reply == 0 ? nil : reply,
            description: "\(components.host ?? "the mail server"): \(String(cString: curl_easy_strerror(code)))"
                + (reply == 0 ? "" : " (reply \(reply))"))
    }
}
