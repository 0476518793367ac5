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
    /// An address range: the network's bytes and the prefix length.
    struct Range: Sendable, Equatable {
        let network: [UInt8]
        let prefix: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == network.count else { return false }
            var bits = prefix
            for (a, n) in zip(address, network) where bits > 0 {
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if a & mask != n & mask { return false }
                bits -= 8
            }
            return true
        }
    }

    /// The header the proxies write the client's address in.
    public enum Header: String, Sendable {
        /// Written by nginx, HAProxy and most load balancers.
        case xForwardedFor = "x-forwarded-for"
        /// RFC 7239.
        case forwarded
    }

    let ranges: [Range]
    let header: Header

    public static let none = try! TrustedProxies(parsing: [])

    /// Parses `10.0.0.0/8`, `192.168.1.7`, `::1`, `fd00::/8`; a bare address is a range of one.
    public init(parsing cidrs: [String], header: Header = .xForwardedFor) throws(TrustedProxyError) {
        self.header = header
        ranges = try cidrs.map { cidr throws(TrustedProxyError) in
            let parts = cidr.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = Self.bytes(of: String(parts[0])) else { throw TrustedProxyError(cidr) }
            let bits = address.count * 8
            guard let prefix = parts.count == 2 ? (parts[1].isDigits ? Int(parts[1]) : nil) : bits,
                (0...bits).contains(prefix)
            else {
                throw TrustedProxyError(cidr)
            }
            return Range(network: address, prefix: prefix)
        }
    }

    public var isEmpty: Bool { ranges.isEmpty }

    func trusts(_ address: [UInt8]) -> Bool { ranges.contains { $0.contains(address) } }

    /// The client's address for a request that came from `peer` with `headers`.
    func client(peer: String, headers: HTTPFields) -> String {
        guard !ranges.isEmpty, let peerBytes = Self.bytes(of: peer), trusts(peerBytes) else { return peer }
        let elements = headers[values: .init(header.rawValue)!].flatMap { $0.split(separator: ",") }
        // A hop without an address (an element without `for=`, `for=unknown`, an obfuscated name) ends the
        // chain: who sent it to the proxy is not known, so the proxy is taken as the client.
        let hops = header == .forwarded ? elements.map(Self.forValue) : elements.map(String.init)
        var client = peer
        for hop in hops.reversed() {
            guard let hop, let bytes = Self.bytes(of: Self.withoutPort(hop)) else { return client }
            client = Self.text(of: bytes)
            if !trusts(bytes) { return client }
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

    /// The 4 or 16 bytes of an IPv4 or IPv6 address in text; an IPv4-mapped IPv6 address as its IPv4 bytes.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return Array(bytes[12...])
        }
        return bytes
    }

    static func text(of bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        return bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)).map { String(cString: $0) }
                ?? "unknown"
        }
    }
}

/// A `--trusted-proxy` value that is not an address or a CIDR range.
public struct TrustedProxyError: Error, CustomStringConvertible {
    public let value: String
    init(_ value: String) { self.value = value }
    public var description: String {
        "--trusted-proxy takes an IP address or a CIDR range such as 10.0.0.0/8 or fd00::/8, not \"\(value)\""
    }
}
