import HTTPTypes
import Hummingbird
import Testing

@testable import Server

@Suite("Trusted proxies")
struct TrustedProxiesTests {
    let proxies = try! TrustedProxies(parsing: ["10.0.0.0/8", "192.168.1.7", "fd00::/8", "172.16.0.0/12"])

    @Test(
        "the client is the nearest forwarded address that is not a trusted proxy",
        arguments: [
            ("10.1.2.3", ["X-Forwarded-For": "198.51.100.7"], "198.51.100.7"),
            ("10.1.2.3", ["X-Forwarded-For": "1.1.1.1, 198.51.100.7, 192.168.1.7"], "198.51.100.7"),
            ("10.1.2.3", ["X-Forwarded-For": "198.51.100.7:5000"], "198.51.100.7"),
            ("::ffff:10.1.2.3", ["X-Forwarded-For": "198.51.100.7"], "198.51.100.7"),
            ("fd12::1", ["Forwarded": #"for="[2001:db8::17]:80";proto=https, for=10.9.9.9"#], "2001:db8::17"),
            ("10.1.2.3", ["Forwarded": "For=198.51.100.8", "X-Forwarded-For": "198.51.100.7"], "198.51.100.8"),
            ("10.1.2.3", ["X-Forwarded-For": "10.0.0.1, 10.0.0.2"], "10.0.0.1"),
            ("10.1.2.3", ["X-Forwarded-For": "198.51.100.7, not-an-address"], "10.1.2.3"),
            ("10.1.2.3", [:], "10.1.2.3"),
            ("172.32.0.1", ["X-Forwarded-For": "198.51.100.7"], "172.32.0.1"),
            ("198.51.100.9", ["X-Forwarded-For": "198.51.100.7"], "198.51.100.9"),
            ("unknown", ["X-Forwarded-For": "198.51.100.7"], "unknown"),
        ])
    func client(peer: String, headers: [String: String], expected: String) {
        var fields = HTTPFields()
        for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
        #expect(proxies.client(peer: peer, headers: fields) == expected)
        #expect(TrustedProxies.none.client(peer: peer, headers: fields) == peer, "without proxies, the peer")
    }

    @Test(
        "anything but an address or a CIDR range is refused",
        arguments: [
            "10.0.0.0/33", "fd00::/129", "10.0.0/8", "", "localhost", "10.0.0.0/-1", "10.0.0.0/", "10.0.0.0/+8",
        ])
    func refused(value: String) {
        #expect(throws: TrustedProxyError.self) { try TrustedProxies(parsing: [value]) }
    }
}
