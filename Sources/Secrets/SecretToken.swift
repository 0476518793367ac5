/// A bearer secret such as an invitation token (`inv_...`) or a service API key (`rbk_...`):
/// a type prefix followed by 32 random bytes in base64url.
///
/// Only `hash` may be stored; `description` never shows the secret.
public struct SecretToken: Sendable, Hashable, CustomStringConvertible {
    /// The kinds of secret this product issues, by prefix.
    public enum Kind: String, Sendable, CaseIterable {
        case invitation = "inv_"
        case apiKey = "rbk_"
    }

    public static let randomByteCount = 32
    /// Characters after the prefix: 32 bytes in unpadded base64url.
    public static let encodedLength = 43

    public let kind: Kind
    /// The whole token, prefix included. Show it to its owner once; never log or store it.
    public let rawValue: String

    /// A new token with 256 bits from OpenSSL's generator.
    public static func generate(_ kind: Kind) -> SecretToken {
        let body = Base64URL.encode(SecureRandom.bytes(count: randomByteCount))
        return SecretToken(kind: kind, rawValue: kind.rawValue + body)
    }

    /// Parses a token a person or client supplied; nil when it is not of the right shape.
    public init?(parsing text: String, as kind: Kind) {
        guard text.hasPrefix(kind.rawValue) else { return nil }
        let body = text.dropFirst(kind.rawValue.count)
        guard body.utf8.count == Self.encodedLength,
            let bytes = Base64URL.decode(body), bytes.count == Self.randomByteCount
        else { return nil }
        self.init(kind: kind, rawValue: text)
    }

    private init(kind: Kind, rawValue: String) {
        self.kind = kind
        self.rawValue = rawValue
    }

    /// SHA-256 of the token: what the database stores and looks tokens up by.
    public var hash: [UInt8] { Digest.sha256(rawValue) }

    public var description: String { "\(kind.rawValue)[redacted]" }

    /// `text` with every run that may be one of these secrets shown as `description` shows it: a prefix and 16
    /// or more base64url characters, so a token cut short when pasted goes too, while the words "inv_ and 43
    /// characters" stay. For messages that quote what someone typed: a link given where an id belongs, say.
    public static func redacting(in text: String) -> String {
        text.replacing(/(inv_|rbk_)[A-Za-z0-9_-]{16,}/) { "\($0.output.1)[redacted]" }
    }
}
