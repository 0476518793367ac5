import Foundation

// What the collaboration and budget domains share: who acts, how listings page, how a domain asks whether a
// user may do something, and how a refusal is named.

/// Who performs an operation.
public enum Actor: Sendable, Hashable, CustomStringConvertible {
    /// The operator running the CLI, with full rights, recorded under this label.
    case `operator`(label: String)
    /// An end user, whose permissions and grantable roles apply.
    case user(UUID)

    public var description: String {
        switch self {
        case .operator(let label): "operator \(label)"
        case .user(let id): "user \(id.uuidString.lowercased())"
        }
    }
}

/// One page of a listing: at most `limit` rows, those that follow the place `after` names in the listing's order
/// (the last row of the page before; nil for the first page).
public struct PageRequest<Key: Sendable & Hashable>: Sendable, Hashable {
    public let limit: Int
    public let after: PageCursor<Key>?

    public init(limit: Int, after: PageCursor<Key>?) {
        precondition(limit > 0, "a page holds at least one row")
        self.limit = limit
        self.after = after
    }
}

/// Where a page of a listing in an order people see (not the id's) begins: after the row `id`, at `key`, that
/// row's place in the order as a page read it. The place holds once the row is deleted or has moved, so a walk
/// over every page neither fails nor skips nor repeats a row for what changed meanwhile. Without `key` (an id a
/// client sent), the row's place now is read, and the row must exist.
public struct PageCursor<Key: Sendable & Hashable>: Sendable, Hashable {
    public let id: UUID
    public let key: Key?

    public init(id: UUID, key: Key? = nil) {
        self.id = id
        self.key = key
    }
}

/// A row of a listing paged by place: where it stands in the listing's order, which the next page follows.
public protocol ListedRow {
    associatedtype OrderKey: Sendable & Hashable
    var cursor: PageCursor<OrderKey> { get }
}

/// A refusal with a stable code for programs (`permission_denied`, ...), which the metrics count by.
public protocol CodedError: Error {
    var codeName: String { get }
    var message: String { get }
    /// For a refusal that lifts on its own (a rate limit): when the same request may succeed.
    var retryAt: Date? { get }
    /// What the operator may read and a client may not: the database's own words on why it cannot be reached,
    /// which name its hosts, ports and logins.
    var detail: String? { get }
}

extension CodedError {
    public var retryAt: Date? { nil }
    public var detail: String? { nil }
}

/// One domain's refusal codes, named as programs see them. Domains use the same name for the same refusal, so
/// that the API and the CLI answer every domain alike.
public protocol RefusalCode: RawRepresentable<String>, Sendable, Hashable, CaseIterable {
    /// Where a refusal from elsewhere lands when this domain has no code of its name.
    static var invalidInput: Self { get }
}

/// Every refusal of one domain's operations: a stable code for programs and a message for people.
public struct DomainError<Codes: RefusalCode>: Error, Sendable, Equatable, CustomStringConvertible, CodedError {
    public typealias Code = Codes

    public let code: Code
    public let message: String
    public let retryAt: Date?
    public let detail: String?

    public init(_ code: Code, _ message: String, retryAt: Date? = nil, detail: String? = nil) {
        self.code = code
        self.message = message
        self.retryAt = retryAt
        self.detail = detail
    }

    /// A refusal from elsewhere (another domain, the rules for text, the permission checker) under this domain's
    /// code of the same name.
    public init(_ refusal: any CodedError) {
        self.init(
            Code(rawValue: refusal.codeName) ?? .invalidInput, refusal.message, retryAt: refusal.retryAt,
            detail: refusal.detail)
    }

    /// For the operator (logs, the CLI): the message with the detail.
    public var description: String { detail.map { "\(message) (\($0))" } ?? message }
    public var codeName: String { code.rawValue }
}

/// Answers "may `user` do `permission` in `couple`?" for a domain that guards its operations with the
/// collaboration core's permissions. Throws when it cannot tell: never a "yes" by default.
public protocol PermissionChecking: Sendable {
    func allows(_ permission: String, user: UUID, couple: UUID) async throws -> Bool
}
