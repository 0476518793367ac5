import CCurl
import Foundation

/// Requests rbac makes to other services (an identity provider's discovery document, its keys, its token
/// endpoint) through libcurl, with TLS by the system's OpenSSL. Only `https` URLs are taken and the peer's
/// certificate is always verified; redirects are not followed. Each request is a `Transfer`: on a thread of its
/// own, so a slow peer never holds one of Swift's cooperative threads, and ended by cancelling its task.
public struct OutboundHTTP: Sendable {
    public struct Configuration: Sendable {
        public var connectTimeout: Duration
        /// The whole request, from connecting to the last byte of the answer.
        public var totalTimeout: Duration
        /// A longer answer is refused, not truncated.
        public var maxResponseBytes: Int
        /// A PEM file of the certificate authorities to trust instead of the system's: a private CA, or a test's.
        public var caFile: String?

        public init(
            connectTimeout: Duration = .seconds(5), totalTimeout: Duration = .seconds(15),
            maxResponseBytes: Int = 1 << 20, caFile: String? = nil
        ) {
            self.connectTimeout = connectTimeout
            self.totalTimeout = totalTimeout
            self.maxResponseBytes = maxResponseBytes
            self.caFile = caFile
        }
    }

    public struct Response: Sendable {
        public let status: Int
        /// Header fields by lower-case name; the last of a repeated field.
        public let headers: [String: String]
        public let body: [UInt8]

        /// `Cache-Control: max-age`, when the answer gives one (and no `no-store` or `no-cache`).
        public var maxAge: Duration? {
            guard let value = headers["cache-control"]?.lowercased() else { return nil }
            let directives = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if directives.contains("no-store") || directives.contains("no-cache") { return .zero }
            for directive in directives where directive.hasPrefix("max-age=") {
                if let seconds = Int64(directive.dropFirst("max-age=".count)), seconds >= 0 { return .seconds(seconds) }
            }
            return nil
        }
    }

    /// Why a request got no answer: the URL, and what libcurl said (never a request's body or credentials).
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let configuration: Configuration
    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public func get(_ url: URL, accept: String = "application/json") async throws -> Response {
        try await perform(url, headers: ["Accept: \(accept)"], body: nil)
    }

    /// POSTs `fields` as `application/x-www-form-urlencoded` (an OAuth token request).
    public func postForm(_ url: URL, _ fields: [(String, String)], headers: [String] = []) async throws -> Response {
        let body = fields.map { "\(Self.formEncoded($0.0))=\(Self.formEncoded($0.1))" }.joined(separator: "&")
        return try await post(
            url, body: Array(body.utf8), contentType: "application/x-www-form-urlencoded",
            headers: headers + ["Accept: application/json"])
    }

    /// POSTs `body` as `contentType` with the header lines `headers` ("Name: value").
    public func post(_ url: URL, body: [UInt8], contentType: String, headers: [String] = []) async throws -> Response {
        try await perform(url, headers: headers + ["Content-Type: \(contentType)"], body: body)
    }

    private func perform(_ url: URL, headers: [String], body: [UInt8]?) async throws -> Response {
        guard url.scheme?.lowercased() == "https", url.host != nil else {
            throw Failure(description: "\(Self.redacted(url)): only https URLs are fetched")
        }
        let configuration = configuration
        return try await Transfer.run(label: "rbac.outbound-http") {
            try Self.performBlocking(url, headers: headers, body: body, configuration, $0)
        }
    }

    /// What one request collects, reached from libcurl's callbacks through their context pointer.
    private final class Collector {
        var body: [UInt8] = []
        var headerLines: [String] = []
        let limit: Int
        var overflowed = false
        init(limit: Int) { self.limit = limit }
    }

    private static func performBlocking(
        _ url: URL, headers: [String], body: [UInt8]?, _ configuration: Configuration, _ transfer: Transfer
    ) throws -> Response {
        _ = globalInit
        guard let curl = curl_easy_init() else { throw Failure(description: "libcurl could not start a request") }
        defer { curl_easy_cleanup(curl) }
        let collector = Collector(limit: configuration.maxResponseBytes)
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }

        func milliseconds(_ duration: Duration) -> Int {
            Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
        }
        var code = rbac_curl_set_string(curl, CURLOPT_URL, url.absoluteString)
        let settings: [(CURLoption, Int)] = [
            (CURLOPT_NOSIGNAL, 1), (CURLOPT_SSL_VERIFYPEER, 1), (CURLOPT_SSL_VERIFYHOST, 2),
            (CURLOPT_FOLLOWLOCATION, 0), (CURLOPT_CONNECTTIMEOUT_MS, milliseconds(configuration.connectTimeout)),
            (CURLOPT_TIMEOUT_MS, milliseconds(configuration.totalTimeout)),
        ]
        for (option, value) in settings where code == CURLE_OK { code = rbac_curl_set_long(curl, option, value) }
        if code == CURLE_OK { code = rbac_curl_set_string(curl, CURLOPT_PROTOCOLS_STR, "https") }
        if code == CURLE_OK {
            code = rbac_curl_set_offset(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(configuration.maxResponseBytes))
        }
        if code == CURLE_OK, let caFile = configuration.caFile {
            code = rbac_curl_set_string(curl, CURLOPT_CAINFO, caFile)
        }
        if code == CURLE_OK { code = rbac_curl_set_pointer(curl, CURLOPT_HTTPHEADER, list) }
        let context = Unmanaged.passUnretained(collector).toOpaque()
        if code == CURLE_OK { code = rbac_curl_set_callback(curl, CURLOPT_WRITEFUNCTION, collectBody) }
        if code == CURLE_OK { code = rbac_curl_set_pointer(curl, CURLOPT_WRITEDATA, context) }
        if code == CURLE_OK { code = rbac_curl_set_callback(curl, CURLOPT_HEADERFUNCTION, collectHeader) }
        if code == CURLE_OK { code = rbac_curl_set_pointer(curl, CURLOPT_HEADERDATA, context) }
        // COPYPOSTFIELDS: libcurl keeps its own copy, so the Swift bytes need not outlive this call. The size
        // goes first, or libcurl would take the body for a C string.
        if code == CURLE_OK, let body {
            code = rbac_curl_set_offset(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            // A byte more than the size, so that an empty body still has an address to copy from.
            var bytes = body + [0]
            if code == CURLE_OK {
                code = bytes.withUnsafeMutableBytes {
                    rbac_curl_set_pointer(curl, CURLOPT_COPYPOSTFIELDS, $0.baseAddress)
                }
            }
        }
        do {
            if code == CURLE_OK { code = try withExtendedLifetime(collector) { try transfer.perform(curl) } }
        } catch let failure as Transfer.Failure {
            throw Failure(description: "\(redacted(url)): \(failure)")
        }
        guard code == CURLE_OK else {
            let reason =
                collector.overflowed || code == CURLE_FILESIZE_EXCEEDED
                ? "the answer is longer than \(configuration.maxResponseBytes) bytes"
                : String(cString: curl_easy_strerror(code))
            throw Failure(description: "\(redacted(url)): \(reason)")
        }
        var status = 0
        _ = rbac_curl_response_code(curl, &status)
        return Response(status: status, headers: fields(collector.headerLines), body: collector.body)
    }

    private static let collectBody: rbac_curl_data_callback = { data, size, count, context in
        let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        guard collector.body.count + length <= collector.limit else {
            collector.overflowed = true
            return 0  // libcurl stops with CURLE_WRITE_ERROR
        }
        data.map { collector.body.append(contentsOf: UnsafeRawBufferPointer(start: $0, count: length)) }
        return length
    }

    private static let collectHeader: rbac_curl_data_callback = { data, size, count, context in
        let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        if let data, collector.headerLines.count < 200 {
            collector.headerLines.append(
                String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self))
        }
        return length
    }

    /// The fields of the last response's header block (a `100 Continue` block before it is dropped).
    private static func fields(_ lines: [String]) -> [String: String] {
        var fields: [String: String] = [:]
        for line in lines {
            if line.hasPrefix("HTTP/") {
                fields = [:]
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            fields[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return fields
    }

    /// The URL without its query or any user information, for messages.
    static func redacted(_ url: URL) -> String {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        components?.query = nil
        components?.user = nil
        components?.password = nil
        return components?.string ?? "the URL"
    }

    /// RFC 3986's unreserved characters, ASCII only: everything else is percent-encoded.
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    private static func formEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }
}
