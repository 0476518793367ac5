import Collaboration
import Hummingbird
import Logging
import NIOCore

/// The request context: Hummingbird's core storage, the client's address (for rate limiting), and the
/// service key that authenticated the request, if any.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    private let channel: any Channel
    public var serviceKey: ServiceKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// The peer's IP address, without the port. Formatted when asked for: only the invitation routes ask.
    public var peerAddress: String { channel.remoteAddress?.ipAddress ?? "unknown" }

    /// The client's IP address: the peer's, or what a trusted proxy among `proxies` says it forwarded for.
    func clientAddress(_ request: Request, trusting proxies: TrustedProxies) -> String {
        proxies.client(peer: peerAddress, headers: request.headers)
    }

    /// Request bodies above 64 KiB are refused with 413 (a batch of 100 checks is about 15 KiB): at once when the
    /// head declares such a length (`BodyLimitMiddleware`), else once that much has been read.
    public static let maxBody = 64 * 1024
    public var maxUploadSize: Int { Self.maxBody }

    /// Whether a body whose `Content-Length` field says `declared` is over `maxBody`, and so refused from its head.
    static func refuses(declaredLength declared: String?) -> Bool {
        declared.flatMap { Int($0) }.map { $0 > maxBody } ?? false
    }

    public var requestDecoder: StrictJSONDecoder { StrictJSONDecoder() }
}
