import Foundation

/// A name a person gave (a couple, a scenario, an item, an expense): without the whitespace around it, 1 to 200
/// characters long, as the tables' checks require, and without control characters; else an `invalid_input`
/// error naming `field`.
public func validatedName(_ text: String, _ field: String) throws(CollaborationError) -> String {
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    guard (1...200).contains(trimmed.count) else {
        throw CollaborationError(.invalidInput, "\(field) must be 1 to 200 characters")
    }
    try refuseControlCharacters(trimmed, field)
    return trimmed
}

/// Refuses text a person gave that holds a control character (NUL, ESC, line breaks, tabs, DEL ...): PostgreSQL
/// cannot store a NUL, and the others, printed later by the CLI or written to a log, could rewrite a terminal or
/// pass for more lines than one.
public func refuseControlCharacters(_ text: String, _ field: String) throws(CollaborationError) {
    guard !containsControlCharacter(text) else {
        throw CollaborationError(
            .invalidInput, "\(field) must not contain control characters (NUL, escape, line breaks, tabs, ...)")
    }
}

/// `text` in double quotes, for a message that echoes what a person typed: control characters are shown escaped
/// (`\u{1B}`) and the text is cut at 100 characters, so an echo can neither rewrite a terminal nor pass for
/// more than one log line.
public func quoted(_ text: some StringProtocol) -> String {
    var shown = ""
    for scalar in text.unicodeScalars.prefix(100) {
        if isControl(scalar) {
            shown += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            shown.unicodeScalars.append(scalar)
        }
    }
    return "\"" + shown + (text.unicodeScalars.count > 100 ? "…" : "") + "\""
}

func containsControlCharacter(_ text: String) -> Bool {
    text.unicodeScalars.contains(where: isControl)
}

private func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.generalCategory == .control }

/// A role's name, such as `owner` or `planner`: lower-case letters and underscores.
public struct RoleName: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init?(rawValue: String) {
        guard rawValue.utf8.count <= 63, isLowercaseWord(rawValue.utf8[...]) else { return nil }
        self.rawValue = rawValue
    }

    /// Parses a role a person typed; the error says what a role name looks like.
    public init(validating text: String) throws(CollaborationError) {
        guard let role = RoleName(rawValue: text) else {
            throw CollaborationError(
                .invalidInput, "\(quoted(text)) is not a role name (lower-case letters and underscores)")
        }
        self = role
    }

    public static let owner = RoleName(rawValue: "owner")!
    public var description: String { rawValue }
}

/// A permission string, `area.action`, such as `budget.edit`.
public struct Permission: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init?(rawValue: String) {
        let bytes = rawValue.utf8
        guard bytes.count <= 100, let dot = bytes.firstIndex(of: UInt8(ascii: ".")),
            isLowercaseWord(bytes[..<dot]), isLowercaseWord(bytes[bytes.index(after: dot)...])
        else { return nil }
        self.rawValue = rawValue
    }

    public init(validating text: String) throws(CollaborationError) {
        guard let permission = Permission(rawValue: text) else {
            throw CollaborationError(
                .invalidInput, "\(quoted(text)) is not a permission (area.action, e.g. budget.edit)")
        }
        self = permission
    }

    public var description: String { rawValue }
}

/// `[a-z][a-z_]*`. Checked byte by byte: permission names are parsed for every permission set read from the
/// database, and a Swift regex literal is compiled anew each time it is evaluated.
private func isLowercaseWord(_ bytes: Substring.UTF8View) -> Bool {
    guard let first = bytes.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) else { return false }
    return bytes.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") }
}

/// An email address, checked for shape only (something@domain, at most 320 characters).
public struct EmailAddress: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init?(rawValue: String) {
        guard rawValue.count <= 320, !containsControlCharacter(rawValue),
            rawValue.wholeMatch(of: /[^@\s]+@[^@\s]+\.[^@\s]+/) != nil
        else { return nil }
        self.rawValue = rawValue
    }

    public init(validating text: String) throws(CollaborationError) {
        guard let email = EmailAddress(rawValue: text) else {
            throw CollaborationError(.invalidInput, "\(quoted(text)) is not an email address")
        }
        self = email
    }

    public var description: String { rawValue }
}

/// A user named by id or by email address, as people name them on the command line.
public enum UserReference: Sendable, Hashable, CustomStringConvertible {
    case id(UUID)
    case email(EmailAddress)

    /// A UUID, else an email address; anything else is refused before any query runs.
    public init(parsing text: String) throws(CollaborationError) {
        if let id = UUID(parsing: text) {
            self = .id(id)
        } else if let email = EmailAddress(rawValue: text) {
            self = .email(email)
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
