import Testing

@testable import Secrets

@Suite("Secret tokens")
struct SecretTokenTests {
    private static let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    @Test("10,000 invitation tokens are distinct, of the right length and alphabet")
    func tokensAreDistinct() {
        var seen = Set<String>()
        for _ in 0..<10_000 {
            let token = SecretToken.generate(.invitation)
            #expect(token.rawValue.hasPrefix("inv_"))
            let body = token.rawValue.dropFirst(4)
            #expect(body.count == 43)
            #expect(body.allSatisfy(Self.alphabet.contains))
            seen.insert(token.rawValue)
        }
        #expect(seen.count == 10_000)
    }

    @Test("a token parses back, and its hash is the SHA-256 of its text")
    func parseAndHash() throws {
        let token = SecretToken.generate(.apiKey)
        let parsed = try #require(SecretToken(parsing: token.rawValue, as: .apiKey))
        #expect(parsed == token)
        #expect(parsed.hash == Digest.sha256(token.rawValue))
        #expect(parsed.hash.count == 32)
    }

    @Test(
        "malformed tokens are refused",
        arguments: [
            "", "inv_", "rbk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "inv_AAAA",
            "inv_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "inv_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+",
            "inv_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB",  // non-zero padding bits
            "inv_'); drop table invitations; --AAAAAAAAAAAAAAAAAAAA",
        ])
    func malformed(text: String) {
        #expect(SecretToken(parsing: text, as: .invitation) == nil)
    }

    @Test("a token's description never shows the secret")
    func redacted() {
        let token = SecretToken.generate(.invitation)
        #expect(!"\(token)".contains(token.rawValue.dropFirst(4)))
        #expect("\(token)" == "inv_[redacted]")
    }

    @Test("secrets quoted in a message are redacted, and the message's words are kept")
    func redactedInText() {
        let invitation = SecretToken.generate(.invitation).rawValue
        let key = SecretToken.generate(.apiKey).rawValue
        #expect(
            SecretToken.redacting(in: "\"https://x.example/invitations/\(invitation)\" is not a couple id")
                == "\"https://x.example/invitations/inv_[redacted]\" is not a couple id")
        #expect(SecretToken.redacting(in: "\(key) and \(key.prefix(20))") == "rbk_[redacted] and rbk_[redacted]")
        let words = "not an invitation token (inv_ and 43 characters); inv_short stays"
        #expect(SecretToken.redacting(in: words) == words)
    }

    @Test("base64url round-trips every length and matches RFC 4648 vectors")
    func base64url() {
        for length in 0..<40 {
            let bytes = SecureRandom.bytes(count: length)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode(Array("fooba".utf8)) == "Zm9vYmE")
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.decode("Zm9v!") == nil)
    }
}
