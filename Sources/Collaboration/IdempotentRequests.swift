import Foundation

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
    /// Another request was sent with this key.
    case otherRequest
}

/// The requests sent with an `Idempotency-Key`, by service key, and their answers.
public protocol IdempotentRequestStore: Sendable {
    /// Claims `idempotencyKey` of `key` for a request of this `fingerprint` for `holdFor`, or says why not.
    func claim(key: UUID, idempotencyKey: String, fingerprint: [UInt8], holdFor: Duration) async throws
        -> IdempotentRequest
    /// Holds `claim` for `holdFor` from now; false when it is no longer this instance's.
    func renew(_ claim: UUID, holdFor: Duration) async throws -> Bool
    /// Keeps the success of the request `claim` ran, for the same request sent again.
    func record(_ claim: UUID, status: Int, body: [UInt8]?, withheld: Bool) async throws
    /// Gives up `claim` without an answer: the request failed and changed nothing, and may run again.
    func release(_ claim: UUID) async throws
    /// Deletes what was sent longer ago than the store keeps it (and no longer answers for); returns how many.
    func prune() async throws -> Int
}
