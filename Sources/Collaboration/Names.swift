import Foundation

/// A name whose shape `init?(rawValue:)` checks, parsed from what a person typed by `init(validating:)`.
public protocol CheckedName: RawRepresentable<String>, CustomStringConvertible {
    /// What a name of this kind looks like, as an error tells it.
    static var shape: String { get }
}

extension CheckedName {
    /// Parses `text`; the error says what a name of this kind looks like.
    public init(validating text: String) throws(CollaborationError) {
        guard let name = Self(rawValue: text) else {
            throw CollaborationError(.invalidInput, "\(quoted(text)) is not \(Self.shape)")
        }
        self = name
    }

    public var description: String { rawValue }
}

/// A role's name, such as `owner` or `planner`: lower-case letters and underscores.
public struct RoleName: CheckedName, Hashable, Sendable, Codable {
    public static let shape = "a role name (lower-case letters and underscores; at most 63)"
    public static let owner = RoleName(rawValue: "owner")!
    public let rawValue: String

    public init?(rawValue: String) {
        guard rawValue.utf8.count <= 63, isLowercaseWord(rawValue.utf8[...]) else { return nil }
        self.rawValue = rawValue
    }
}

/// A permission string, `area.action`, such as `budget.edit`.
public struct Permission: CheckedName, Hashable, Sendable, Codable {
    public static let shape = "a permission (area.action, e.g. budget.edit; at most 100 characters)"
    /// Handing the couple over: it goes with ownership, so the owner role alone holds it (`apply_policy`, and no
    /// couple's own role grants it).
    public static let transfer = Permission(rawValue: "couple.transfer")!
    public let rawValue: String

    public init?(rawValue: String) {
        let bytes = rawValue.utf8
        guard bytes.count <= 100, let dot = bytes.firstIndex(of: UInt8(ascii: ".")),
            isLowercaseWord(bytes[..<dot]), isLowercaseWord(bytes[bytes.index(after: dot)...])
        else { return nil }
        self.rawValue = rawValue
    }
}

/// `[a-z][a-z_]*`. Checked byte by byte: permission names are parsed for every permission set read from the
/// database, and a Swift regex literal is compiled anew each time it is evaluated.
private func isLowercaseWord(_ bytes: Substring.UTF8View) -> Bool {
    guard let first = bytes.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) else { return false }
    return bytes.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") }
}

/// An email address, checked for shape only: name@domain.tld, at most 320 code points, no whitespace, control
/// characters, bidirectional overrides or characters drawn as nothing, nothing that needs quotes, and dots only
/// between other characters. The database holds every stored address to the same rule (`rbac.is_email_address`
/// and the checks of sql/0012, 0040 and 0041); `EmailAddressRuleTests` keeps the two in step.
public struct EmailAddress: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    /// Kept in Unicode's composed form (NFC): PostgreSQL compares bytes where Swift takes canonically equivalent
    /// text as equal, so `zoë` typed with a combining diaeresis would otherwise be another address there. And
    /// kept with the labels of its domain that IDNA writes in ASCII (`xn--…`) in the letters they stand for:
    /// `ann@xn--bcher-kva.example` is `ann@bücher.example`, as `rbac.stored_email` writes it.
    public init?(rawValue: String) {
        guard case .success(let stored) = Self.stored(rawValue) else { return nil }
        self.rawValue = stored
    }

    /// The address `text` is; else an error that says why it is none.
    public init(validating text: String) throws(CollaborationError) {
        switch Self.stored(text) {
        case .success(let stored): rawValue = stored
        case .failure(let refusal):
            throw CollaborationError(.invalidInput, "\(quoted(text)) is not an email address: \(refusal.reason)")
        }
    }

    private struct Refusal: Error {
        let reason: String
    }

    /// `text` as it is stored, or why it is no address.
    private static func stored(_ text: String) -> Result<String, Refusal> {
        guard let written = domainInLetters(text) else {
            return .failure(
                Refusal(reason: "a label of its domain written xn--… is not the Punycode of a label IDNA takes"))
        }
        let stored = written.utf8.allSatisfy { $0 < 0x80 } ? written : written.precomposedStringWithCanonicalMapping
        // Read as code points, as PostgreSQL reads text: an `@` or a dot that a combining mark follows is one
        // character to Swift, and a character may be more than one code point to `length`.
        let scalars = stored.unicodeScalars
        let reason: String? =
            if scalars.count > 320 {
                "it is longer than 320 characters"
            } else if containsControlCharacter(stored) {
                "it holds a control character or a bidirectional override"
            } else if containsInvisibleCharacter(stored) {
                // `pia\u{200B}@example.com` reads as `pia@example.com` wherever it is shown, yet is another
                // address. Joiners are refused too, though some scripts write them inside words: no mail provider
                // hands out such a name, and one after a Latin letter only hides.
                "it holds an invisible character (a zero-width space or joiner, a direction mark, ...)"
            } else if let address = stored.wholeMatch(of: /[^<>]*<([^<>]+)>/.matchingSemantics(.unicodeScalar)) {
                // As a mail program copies it: `Pia <pia@example.com>`.
                "it wraps the address in <> (give \(address.1) alone)"
            } else if let address = stored.wholeMatch(
                of: /[Mm][Aa][Ii][Ll][Tt][Oo]:(.+)/.matchingSemantics(.unicodeScalar))
            {
                // As a link's target copies it.
                "it begins with mailto: (give \(address.1) alone)"
            } else if stored.contains(/\s/.matchingSemantics(.unicodeScalar)) {
                "it holds a space"
            } else if scalars.count(where: { $0 == "@" }) != 1 {
                "it needs one @, between a name and a domain"
            } else if stored.contains(/["(),:;<>\[\\\]]/.matchingSemantics(.unicodeScalar)) {
                // Characters an address holds only in quotes or a bracketed domain: mail takes `a,b@example.com`
                // or `a>@example.com` in a header or an SMTP command as something else.
                "it holds one of \" ( ) , : ; < > [ \\ ] (rbac takes no quoted name or bracketed domain)"
            } else if stored.wholeMatch(of: /[^@]+@[^@]+\.[^@]+/.matchingSemantics(.unicodeScalar)) == nil {
                "it needs a name before its @ and a dot inside its domain (name@example.com)"
            } else if stored.wholeMatch(of: /[^.@]+(\.[^.@]+)*@[^.@]+(\.[^.@]+)+/.matchingSemantics(.unicodeScalar))
                == nil
            {
                "a dot cannot begin or end its name or its domain, nor follow another dot"
            } else {
                nil
            }
        return reason.map { .failure(Refusal(reason: $0)) } ?? .success(stored)
    }

    public var description: String { rawValue }

    /// The address with each label of its domain beyond ASCII in IDNA's ASCII spelling, lower case, as
    /// `rbac.ascii_domain` writes a domain: as mail is sent to it. A mail server that does not take UTF-8
    /// (SMTPUTF8) takes the domain so, and libcurl converts it only in a process whose locale is UTF-8.
    public var withASCIIDomain: String {
        let at = rawValue.unicodeScalars.firstIndex(of: "@")!
        return String(rawValue.unicodeScalars[...at]) + IDNA.asciiDomain(rawValue.unicodeScalars[at...].dropFirst())
    }

    /// `text` with its domain mapped as IDNA maps it (`IDNA.mapped`) and each label written `xn--…` in the letters
    /// it stands for (`IDNA.unicodeDomain`), as `rbac.email_in_letters` writes it; nil when one of those does not
    /// stand for a label IDNA takes. Text with other than one `@` is no address, and is returned as it is.
    private static func domainInLetters(_ text: String) -> String? {
        let scalars = text.unicodeScalars
        guard let at = scalars.firstIndex(of: "@"), !scalars[at...].dropFirst().contains("@") else { return text }
        let domain = IDNA.mapped(String(scalars[at...].dropFirst()))
        return IDNA.unicodeDomain(domain.unicodeScalars[...]).map { String(scalars[...at]) + $0 }
    }

    /// The address with its local part hidden but for its first character, as `public.invitation_preview` shows
    /// it: `o•••@example.com`.
    public static func masked(_ address: String) -> String {
        let parts = address.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        return "\(parts.first?.prefix(1) ?? "")•••@\(parts.count > 1 ? parts[1] : "")"
    }
}

/// A user named by id or by email address, as people name them on the command line.
public enum UserReference: Sendable, Hashable, CustomStringConvertible {
    case id(UUID)
    case email(EmailAddress)

    /// A UUID, else an email address; anything else is refused before any query runs. Text with an `@` was meant
    /// as an address, and is told what is wrong with it.
    public init(parsing text: String) throws(CollaborationError) {
        if let id = UUID(parsing: text) {
            self = .id(id)
        } else if text.contains("@") {
            self = .email(try EmailAddress(validating: text))
        } else {
            throw CollaborationError(.invalidInput, "\(quoted(text)) is neither a user id (UUID) nor an email address")
        }
    }

    public var description: String {
        switch self {
        case .id(let id): id.uuidString.lowercased()
        case .email(let email): email.rawValue
        }
    }
}

/// Parses a couple id, refusing anything that is not a UUID before any query runs.
public func parseCoupleID(_ text: String) throws(CollaborationError) -> UUID {
    guard let id = UUID(parsing: text) else {
        throw CollaborationError(.invalidInput, "\(quoted(text)) is not a couple id (a UUID)")
    }
    return id
}
