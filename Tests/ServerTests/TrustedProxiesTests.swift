import HTTPTypes
import Hummingbird
import Testing

@testable import Server

@Suite("Trusted proxies")
struct TrustedProxiesTests {
    @Test(
        "the client is the nearest address, in the header the proxies write, that is not a trusted proxy",
        arguments: [
            (.xForwardedFor, "10.1.2.3", ["X-Forwarded-For": "198.51.100.7"], "198.51.100.7"),
            (.xForwardedFor, "10.1.2.3", ["X-Forwarded-For": "1.1.1.1, 198.51.100.7, 192.168.1.7"], "198.51.100.7"),
            (.xForwardedFor, "10.1.2.3", ["X-Forwarded-For": "198.51.100.7:5000"], "198.51.100.7"),
            (.xForwardedFor, "::ffff:10.1.2.3", ["X-Forwarded-For": "198.51.100.7"], "198.51.100.7"),
            // A client's own Forwarded header, which a proxy that writes X-Forwarded-For passes on, names no one.
            (.xForwardedFor, "10.1.2.3", ["Forwarded": "for=198.51.100.8"], "10.1.2.3"),
            (
                .xForwardedFor, "10.1.2.3", ["Forwarded": "for=198.51.100.8", "X-Forwarded-For": "198.51.100.7"],
                "198.51.100.7"
            ),
            (.xForwardedFor, "10.1.2.3", ["X-Forwarded-For": "10.0.0.1, 10.0.0.2"], "10.0.0.1"),
            (.xForwardedFor, "10.1.2.3", ["X-Forwarded-For": "198.51.100.7, not-an-address"], "10.1.2.3"),
            (.xForwardedFor, "10.1.2.3", [:], "10.1.2.3"),
            (.xForwardedFor, "172.32.0.1", ["X-Forwarded-For": "198.51.100.7"], "172.32.0.1"),
            (.xForwardedFor, "198.51.100.9", ["X-Forwarded-For": "198.51.100.7"], "198.51.100.9"),
            (.xForwardedFor, "unknown", ["X-Forwarded-For": "198.51.100.7"], "unknown"),
            (
                .forwarded, "fd12::1", ["Forwarded": #"for="[2001:db8::17]:80";proto=https, for=10.9.9.9"#],
                "2001:db8::17"
            ),
            (
                .forwarded, "10.1.2.3", ["Forwarded": "For=198.51.100.8", "X-Forwarded-For": "198.51.100.7"],
                "198.51.100.8"
            ),
            (.forwarded, "10.1.2.3", ["X-Forwarded-For": "198.51.100.7"], "10.1.2.3"),
            // The nearest element names no address: who reached the proxy is unknown, so the proxy is the client.
            (.forwarded, "10.1.2.3", ["Forwarded": "for=198.51.100.8, proto=https"], "10.1.2.3"),
            (.forwarded, "10.1.2.3", ["Forwarded": "for=198.51.100.8, for=unknown"], "10.1.2.3"),
            (.forwarded, "10.1.2.3", ["Forwarded": "for=198.51.100.8, for=10.4.4.4;by=10.1.2.3"], "198.51.100.8"),
        ] as [(TrustedProxies.Header, String, [String: String], String)])
    func client(header: TrustedProxies.Header, peer: String, headers: [String: String], expected: String) throws {
        var fields = HTTPFields()
        for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
        let proxies = try TrustedProxies(
            parsing: ["10.0.0.0/8", "192.168.1.7", "fd00::/8", "172.16.0.0/12"], header: header)
        #expect(proxies.client(peer: peer, headers: fields) == expected)
        #expect(TrustedProxies.none.client(peer: peer, headers: fields) == peer, "without proxies, the peer")
    }

    @Test(
        "anything but an address or a CIDR range is refused",
        arguments: [
            "10.0.0.0/33", "fd00::/129", "10.0.0/8", "", "localhost", "10.0.0.0/-1", "10.0.0.0/", "10.0.0.0/+8",
        ])
    func refused(value: String) {
        #expect(throws: AddressRangeError.self) { try TrustedProxies(parsing: [value]) }
    }
}
