import Secrets
import Testing

@Suite("Delivery key: AES-256-GCM boxes")
struct DeliveryKeyTests {
    @Test("a box opens for its context under its key, and for nothing else")
    func roundTrip() throws {
        let key = try DeliveryKey(hex: DeliveryKey.generateHex())
        let box = key.seal(Array("inv_secret".utf8), for: "row-1")
        #expect(key.open(box, for: "row-1") == Array("inv_secret".utf8))
        #expect(!box.contains(subsequence: Array("inv_secret".utf8)), "the token is not in the box in the clear")
        #expect(key.open(box, for: "row-2") == nil, "moved to another row")
        #expect(try DeliveryKey(hex: DeliveryKey.generateHex()).open(box, for: "row-1") == nil, "another key")
        for index in box.indices {
            var altered = box
            altered[index] ^= 0x01
            #expect(key.open(altered, for: "row-1") == nil, "byte \(index) altered")
        }
        #expect(key.open(box.dropLast(), for: "row-1") == nil)
        #expect(key.seal([], for: "x").count == 28 && key.open(key.seal([], for: "x"), for: "x") == [])
        #expect(key.seal([1], for: "x") != key.seal([1], for: "x"), "a fresh nonce each time")
    }

    @Test("a key is 64 hexadecimal digits")
    func parsing() {
        #expect(throws: DeliveryKey.Failure.self) { try DeliveryKey(hex: "abc") }
        #expect(throws: DeliveryKey.Failure.self) { try DeliveryKey(hex: String(repeating: "g", count: 64)) }
        #expect(DeliveryKey.generateHex().count == 64)
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<$0 + subsequence.count]) == subsequence }
    }
}
