import Collaboration
import Hummingbird
import Logging

/// The request context: Hummingbird's core storage, the client's address (for rate limiting), and the
/// service key that authenticated the request, if any.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address, without the port.
    public let clientAddress: String
    public var serviceKey: ServiceKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// Request bodies above 64 KiB are refused with 413 (a batch of 100 checks is about 15 KiB).
    public var maxUploadSize: Int { 64 * 1024 }
}
