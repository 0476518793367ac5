import Foundation

/// Text a person gave that the rules refuse (`invalid_input`), with a message naming the field.
public struct InvalidText: Error, Sendable, Equatable, CodedError {
    public let message: String
    public var codeName: String { "invalid_input" }

    public init(_ message: String) { self.message = message }
}

/// A name a person gave (a couple, a scenario, an item, an expense): without the white space around it (spaces,
/// and Unicode's line and paragraph separators, which are no control characters), 1 to 200 characters long
/// (`storedLength`), as the tables' checks require, and without control characters (`refuseControlCharacters`)
/// anywhere, its ends included: a newline or a tab there is no space to trim but a mistake, and the API's document
/// refuses it too; else an `invalid_input` error naming `field`. At most 200 as given, too: the API's document says
/// so of what a client sends, and one rule serves every way in.
public func validatedName(_ text: String, _ field: String) throws(InvalidText) -> String {
    guard text.storedLength <= 200, !text.isEmpty else {
        throw InvalidText("\(field) must be 1 to 200 characters")
    }
    try refuseControlCharacters(text, field)
    // Blank, not too short, is what is wrong with a name of spaces or of a zero-width space, which trimming drops.
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    try refuseBlank(trimmed, field)
    return trimmed
}

/// Refuses text a person gave that shows nothing (`isBlank`), such as a name of zero-width spaces: listed, it
/// would look like no name at all.
public func refuseBlank(_ text: String, _ field: String) throws(InvalidText) {
    guard !isBlank(text) else {
        throw InvalidText(
            "\(field) must show something, not only spaces and invisible characters (zero-width spaces, joiners, "
                + "fillers, ...)")
    }
}

/// Whether `text` shows nothing: it holds only white space (Unicode's White_Space), characters drawn as nothing
/// (Default_Ignorable_Code_Point: zero-width spaces and joiners, the byte-order mark, the soft hyphen, Hangul
/// fillers, variation selectors, ...) and the blank Braille pattern, which is drawn as a space and passes for
/// one. `rbac.is_blank` is the same rule.
public func isBlank(_ text: some StringProtocol) -> Bool {
    text.unicodeScalars.allSatisfy {
        $0.properties.isWhitespace || isInvisible($0) || $0 == "\u{2800}"
    }
}

/// Refuses text a person gave that holds a control character (NUL, ESC, line breaks, tabs, DEL ...) or a
/// bidirectional override: PostgreSQL cannot store a NUL, and the others, printed later by the CLI, an
/// invitation or a log, could rewrite a terminal, pass for more lines than one, or reverse the words around them.
public func refuseControlCharacters(_ text: String, _ field: String) throws(InvalidText) {
    guard !containsControlCharacter(text) else {
        throw InvalidText(
            "\(field) must not contain control characters (NUL, escape, line breaks, tabs, bidirectional overrides, ...)"
        )
    }
}

/// `text` in double quotes, for a message that echoes what a person typed: control characters and characters
/// drawn as nothing are shown escaped (`\u{1B}`, `\u{200B}`) and the text is cut at 100 characters, so an echo can
/// neither rewrite a terminal nor pass for more than one log line, and shows what a refusal of invisible text
/// is about.
public func quoted(_ text: some StringProtocol) -> String {
    let shown = shownEscaped(text.storedPrefix(100)) { isControl($0) || isInvisible($0) }
    return "\"" + shown + (text.storedLength > 100 ? "…" : "") + "\""
}

/// `text` with its control characters and bidirectional overrides shown escaped (`\u{1B}`): for printing what
/// the database holds, which the rules keep free of them but raw SQL need not have.
public func visible(_ text: some StringProtocol) -> String {
    shownEscaped(text, where: isControl)
}

/// `text` with the code points `escaping` picks written `\u{…}`.
private func shownEscaped(_ text: some StringProtocol, where escaping: (Unicode.Scalar) -> Bool) -> String {
    guard text.unicodeScalars.contains(where: escaping) else { return String(text) }
    var shown = ""
    for scalar in text.unicodeScalars {
        if escaping(scalar) {
            shown += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            shown.unicodeScalars.append(scalar)
        }
    }
    return shown
}

public func containsControlCharacter(_ text: String) -> Bool {
    text.unicodeScalars.contains(where: isControl)
}

/// Whether `text` holds a character drawn as nothing (Unicode's Default_Ignorable_Code_Point: zero-width spaces
/// and joiners, direction marks, the soft hyphen, variation selectors, ...). `rbac.invisible_characters` is the
/// same rule.
public func containsInvisibleCharacter(_ text: String) -> Bool {
    text.unicodeScalars.contains(where: isInvisible)
}

private func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
    scalar.properties.isDefaultIgnorableCodePoint
}

/// Unicode's control characters (Cc), and the bidirectional embeddings, overrides and isolates (U+202A to U+202E,
/// U+2066 to U+2069): one of those left open turns the text after it around, so that a couple's name could make
/// an invitation or an audit line read otherwise. The marks LRM, RLM and ALM stay allowed: they only set the
/// direction of the characters beside them, and names written right to left need them.
private func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.properties.generalCategory == .control || (0x202A...0x202E).contains(scalar.value)
        || (0x2066...0x2069).contains(scalar.value)
}

/// A moment as people read it, in UTC: "1 December 2026 at 18:00 UTC" (invitation pages and emails).
public func inWords(_ date: Date) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    calendar.locale = Locale(identifier: "en_US_POSIX")
    let parts = calendar.dateComponents([.day, .month, .year, .hour, .minute], from: date)
    let month = calendar.standaloneMonthSymbols[(parts.month ?? 1) - 1]
    let time = String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    return "\(parts.day ?? 1) \(month) \(parts.year ?? 0) at \(time) UTC"
}

/// HTML-escapes text for element content and attribute values.
public func escape(_ text: String) -> String {
    var escaped = ""
    escaped.reserveCapacity(text.count)
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&#39;"
        default: escaped.append(character)
        }
    }
    return escaped
}

extension StringProtocol {
    /// Its length as the tables' checks count it: PostgreSQL's `length()` counts Unicode scalars, where `count`
    /// counts characters as people see them, so that a letter with an accent typed apart is one character to
    /// Swift and two to the database, and a limit checked with `count` lets through what the table refuses.
    public var storedLength: Int { unicodeScalars.count }

    /// Its first `limit` Unicode scalars: what a column whose check allows `length()` up to `limit` takes.
    public func storedPrefix(_ limit: Int) -> String {
        var prefix = String.UnicodeScalarView()
        prefix.append(contentsOf: unicodeScalars.prefix(limit))
        return String(prefix)
    }

    /// One or more ASCII digits and nothing else: what `Int(_:)` reads, but for its sign.
    public var isDigits: Bool { !isEmpty && utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } }
}

/// Why `text` is no instant `instant(parsing:)` takes, for a refusal naming `field` (an option, a body's field):
/// the day its date misses (`missingDay`), else what an instant looks like.
public func instantRefusal(_ text: String, _ field: String) -> String {
    missingDay(in: text).map { "\(field) \($0)" }
        ?? "\(field) must be an ISO 8601 instant with a zone (2026-09-30T18:00Z) or a date (midnight UTC), not "
        + quoted(text)
}

/// For text `instant(parsing:)` refuses since its date, of the right form, names no day (`2027-02-30T10:00Z`):
/// why, in `CalendarDay.refusal`'s words; nil otherwise, where the forms an instant takes say enough.
public func missingDay(in text: String) -> String? {
    let date = String(text.prefix(10))
    guard date.wholeMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}/) != nil, CalendarDay(date) == nil else { return nil }
    return CalendarDay.refusal(date)
}

/// An instant as people write it: ISO 8601 with a zone (`2026-09-30T18:00Z`, `2026-09-30T18:00:00+02:00`,
/// fractions of a second ignored), or a date alone (`2026-09-30`, midnight UTC), in PostgreSQL's calendar
/// (`CalendarDay.daysSince1970`). Nil for anything else, and for a date or time that does not exist
/// (`2026-02-30`, `24:00`).
public func instant(parsing text: String) -> Date? {
    guard
        let match = text.wholeMatch(
            of:
                /(\d{4}-\d{2}-\d{2})(?:T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?:\.\d{1,9})?(?:Z|([+-])([01]\d|2[0-3]):([0-5]\d)))?/
        ),
        let day = CalendarDay(String(match.1))
    else { return nil }
    func number(_ digits: Substring?) -> Int { digits.flatMap { Int($0) } ?? 0 }
    let offset = (match.5 == "-" ? -1 : 1) * (number(match.6) * 3600 + number(match.7) * 60)
    let time = number(match.2) * 3600 + number(match.3) * 60 + number(match.4)
    return Date(timeIntervalSince1970: TimeInterval(day.daysSince1970 * 86_400 + time - offset))
}
