import Foundation

extension URLComponents {
    /// The port as written when it is none a connection can use (0, or past 65535); nil when the URL names a
    /// port from 1 to 65535, or none. Read from its text: `port` is nil for digits past an Int, as for no port.
    public var unusablePort: Substring? {
        guard let range = rangeOfPort, let text = string?[range] else { return nil }
        return (1...65535).contains(Int(text) ?? 0) ? nil : text
    }
}
