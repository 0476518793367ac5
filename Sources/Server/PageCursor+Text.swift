import Budget
import Collaboration
import Foundation
import Secrets

/// A key of a listing's order that a `next_after` (and the CLI's `--after`) carries: a user's address, when a
/// member joined, ...
public protocol PlaceKey: Codable, Sendable, Hashable {
    /// Whether the database can compare the key as it is, checked on a key read from a client.
    var isComparable: Bool { get }
}

extension Date: PlaceKey {
    /// Years 1 to 9999: no row was made outside them, and far beyond them the conversion to PostgreSQL's
    /// microseconds would overflow.
    public var isComparable: Bool { (-62_135_596_800...253_402_300_799).contains(timeIntervalSince1970) }
}

extension String: PlaceKey {
    /// PostgreSQL's text holds no NUL.
    public var isComparable: Bool { !unicodeScalars.contains("\0") }
}

extension CalendarDay: PlaceKey {
    /// Decoded, it is a day of the years 1 to 9999.
    public var isComparable: Bool { true }
}

extension DueAndName: PlaceKey {
    public var isComparable: Bool { name.isComparable }
}

/// The text of a listing's `next_after`, and of the place the CLI's hint after a full page names: the last
/// row's id, a dot, and the row's place in the listing's order (its key as a JSON array of one, in base64url).
/// The place is what lets the next page begin where that row was, even once the row is gone (a member who left,
/// a user deleted): with the id alone, its place would have to be looked up, and a walk over every page would
/// end there with a 404.
extension PageCursor where Key: PlaceKey {
    public var text: String {
        let id = id.uuidString.lowercased()
        guard let key else { return id }
        // Every key here (a time of the years 1 to 9999, a text, a day) encodes.
        return id + "." + Base64URL.encode(try! JSONEncoder().encode([key]))
    }

    /// `after` as a client sends it: a `next_after`, or a row's id alone, whose place the listing then looks up;
    /// nil for anything else.
    public init?(text: String) {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let id = UUID(parsing: String(parts[0])) else { return nil }
        guard parts.count == 2 else {
            self.init(id: id)
            return
        }
        guard let json = Base64URL.decode(parts[1]), let keys = try? JSONDecoder().decode([Key].self, from: Data(json)),
            keys.count == 1, keys[0].isComparable
        else { return nil }
        self.init(id: id, key: keys[0])
    }
}
