import Foundation

/// Ranges of IP addresses (`10.0.0.0/8`, `192.168.1.7`, `::1`, `fd00::/8`; a bare address is a range of one):
/// the reverse proxies `rbac serve` trusts (`--trusted-proxy`), the clients it shows `/metrics` (`--metrics-from`).
public struct AddressRanges: Sendable {
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

    let ranges: [Range]

    public init(parsing cidrs: [String]) throws(AddressRangeError) {
        ranges = try cidrs.map { cidr throws(AddressRangeError) in
            let parts = cidr.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = Self.bytes(of: String(parts[0])) else { throw AddressRangeError(value: cidr) }
            let bits = address.count * 8
            guard let prefix = parts.count == 2 ? (parts[1].isDigits ? Int(parts[1]) : nil) : bits,
                (0...bits).contains(prefix)
            else {
                throw AddressRangeError(value: cidr)
            }
            return Range(network: address, prefix: prefix)
        }
    }

    public var isEmpty: Bool { ranges.isEmpty }

    func contains(_ address: [UInt8]) -> Bool { ranges.contains { $0.contains(address) } }

    /// Whether `address`, in text, lies in one of the ranges; text that is no address (`unknown`) does not.
    public func contains(_ address: String) -> Bool { Self.bytes(of: address).map(contains) ?? false }

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

/// A value that is not an address or a CIDR range.
public struct AddressRangeError: Error {
    public let value: String

    /// The refusal of the value given to `option`.
    public func message(_ option: String) -> String {
        "\(option) takes an IP address or a CIDR range such as 10.0.0.0/8 or fd00::/8, not \"\(value)\""
    }
}
