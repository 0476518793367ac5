import Foundation

extension URLComponents {
    /// Why `subject` (an option, "a webhook URL") names no server a connection can reach; nil when it names one,
    /// or no host at all (the caller refuses that in its own words). Refused: a port past 1 to 65535 (0 too), a
    /// host with an empty label (a dot at its start, or two in a row), which no name server resolves, and a % escape
    /// in the host, which libcurl and browsers decode there (`a%2E%2Eb` is `a..b`), so that the host is shown as it
    /// is called.
    public func serverRefusal(_ subject: String) -> String? {
        if let port = unusablePort { return "\(subject) must name a port from 1 to 65535, not \(port)" }
        // As typed: `percentEncodedHost` spells an xn-- label in the letters it stands for, percent-encoded.
        guard let range = rangeOfHost, let host = string?[range] else { return nil }
        if host.hasPrefix(".") || host.contains("..") {
            return "\(subject) must name a host without an empty label (a dot at its start, or two in a row)"
        }
        if host.contains("%") {
            return "\(subject) must name its host without % escapes (an international domain in its xn-- form)"
        }
        return nil
    }

    /// The port as written when it is none a connection can use (0, or past 65535); nil when the URL names a
    /// port from 1 to 65535, or none. Read from its text: `port` is nil for digits past an Int, as for no port.
    private var unusablePort: Substring? {
        guard let range = rangeOfPort, let text = string?[range] else { return nil }
        return (1...65535).contains(Int(text) ?? 0) ? nil : text
    }
}
