import Foundation
import Synchronization

/// Where a request sent with an `Idempotency-Key` stands, as its service key sent it before.
public enum IdempotentRequest: Sendable, Equatable {
    /// None was sent with this key (or the last one failed, or its instance stopped holding it): this one runs,
    /// held by `claim` until it is recorded or released.
    case claimed(UUID)
    /// One was, and succeeded: its answer. `body` is nil when there was none, or when it held a secret
    /// (`withheld`), which is not kept.
    case answered(status: Int, body: [UInt8]?, withheld: Bool)
    /// One is running now.
    case running
    /// One failed as the database went away while a statement of it that could commit was sent: it may or may not
    /// have been done.
    case unconfirmed
    /// Another request was sent with this key.
    case otherRequest
}

/// The requests sent with an `Idempotency-Key`, by service key, and their answers.
public protocol IdempotentRequestStore: Sendable {
    /// Claims `idempotencyKey` of `key` for a request of this `fingerprint`, made under `couple`, for `holdFor`, or
    /// says why not.
    func claim(key: UUID, idempotencyKey: String, fingerprint: [UInt8], couple: UUID?, holdFor: Duration)
        async throws -> IdempotentRequest
    /// Holds `claim` for `holdFor` from now; false when it is no longer this instance's.
    func renew(_ claim: UUID, holdFor: Duration) async throws -> Bool
    /// Keeps the success of the request `claim` ran, for the same request sent again; not one that holds what its
    /// couple was, when the couple was deleted meanwhile.
    func record(_ claim: UUID, status: Int, body: [UInt8]?, withheld: Bool) async throws
    /// Gives up `claim` without an answer: the request failed and changed nothing, and may run again.
    func release(_ claim: UUID) async throws
    /// Keeps `claim` as a request that failed unconfirmed (`UnconfirmedChanges`): it does not run again.
    func leaveUnconfirmed(_ claim: UUID) async throws
    /// Deletes what was sent longer ago than the store keeps it (and no longer answers for); returns how many.
    func prune() async throws -> Int
}

/// Whether a request's change may have been made unbeknown to it: the database connection failed after a statement
/// that could commit was sent, before its answer came. The storage marks the one the request's task holds, for the
/// idempotency middleware, which keeps such a request's key as done or not rather than giving it up.
public final class UnconfirmedChanges: Sendable {
    @TaskLocal public static var current: UnconfirmedChanges?
    private let seen = Atomic<Bool>(false)

    public init() {}

    public var any: Bool { seen.load(ordering: .acquiring) }

    public func note() { seen.store(true, ordering: .releasing) }
}
