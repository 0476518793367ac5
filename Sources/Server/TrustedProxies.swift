import Collaboration
import Foundation
import Hummingbird

/// The reverse proxies (`rbac serve --trusted-proxy CIDR`) whose word on the client's address is taken: for a
/// request from one of them, the client is the nearest address in the header they write (`X-Forwarded-For`, or
/// `Forwarded: for=`) that is not itself a trusted proxy. Everyone else's forwarding headers are ignored: a
/// client could write any address there. So is the header the proxies do not write, even on a request they
/// forward: a proxy passes a client's own header on untouched, and reading it would let every request claim
/// an address of its choosing.
public struct TrustedProxies: Sendable {
    /// The header the proxies write the client's address in.
    public enum Header: String, Sendable {
        /// Written by nginx, HAProxy and most load balancers.
        case xForwardedFor = "x-forwarded-for"
        /// RFC 7239.
        case forwarded
    }

    let ranges: AddressRanges
    let header: Header

    public static let none = try! TrustedProxies(parsing: [])

    /// The proxies at `cidrs` (`AddressRanges`), writing the client's address in `header`.
    public init(parsing cidrs: [String], header: Header = .xForwardedFor) throws(AddressRangeError) {
        self.header = header
        ranges = try AddressRanges(parsing: cidrs)
    }

    public var isEmpty: Bool { ranges.isEmpty }

    /// The client's address for a request that came from `peer` with `headers`.
    func client(peer: String, headers: HTTPFields) -> String {
        guard !ranges.isEmpty, let peerBytes = AddressRanges.bytes(of: peer), ranges.contains(peerBytes) else {
            return peer
        }
        let elements = headers[values: .init(header.rawValue)!].flatMap { $0.split(separator: ",") }
        // A hop without an address (an element without `for=`, `for=unknown`, an obfuscated name) ends the
        // chain: who sent it to the proxy is not known, so the proxy is taken as the client.
        let hops = header == .forwarded ? elements.map(Self.forValue) : elements.map(String.init)
        var client = peer
        for hop in hops.reversed() {
            guard let hop, let bytes = AddressRanges.bytes(of: Self.withoutPort(hop)) else { return client }
            client = AddressRanges.text(of: bytes)
            if !ranges.contains(bytes) { return client }
        }
        return client
    }

    /// The `for=` parameter of one `Forwarded` element, unquoted.
    private static func forValue(_ element: Substring) -> String? {
        for pair in element.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "for" else {
                continue
            }
            return parts[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(
                in: CharacterSet(charactersIn: "\""))
        }
        return nil
    }

    /// `1.2.3.4:80` → `1.2.3.4`, `[::1]:80` → `::1`; anything else as it is, without spaces.
    private static func withoutPort(_ hop: String) -> String {
        let hop = hop.trimmingCharacters(in: .whitespaces)
        if hop.hasPrefix("["), let close = hop.firstIndex(of: "]") {
            return String(hop[hop.index(after: hop.startIndex)..<close])
        }
        if hop.filter({ $0 == ":" }).count == 1, let colon = hop.firstIndex(of: ":") { return String(hop[..<colon]) }
        return hop
    }
}
