import Foundation

extension URLComponents {
    /// The port as written when it is none a connection can use (0, or past 65535); nil when the URL names a
    /// port from 1 to 65535, or none. Read from its text: `port` is nil for digits past an Int, as for no port.
    public var unusablePort: Substring? {
        guard let range = rangeOfPort, let text = string?[range] else { return nil }
        return (1...65535).contains(Int(text) ?? 0) ? nil : text
    }

    /// Why `subject` (an option, "a webhook URL") is refused for its port; nil when `unusablePort` is.
    public func portRefusal(_ subject: String) -> String? {
        unusablePort.map { "\(subject) must name a port from 1 to 65535, not \($0)" }
    }
}
