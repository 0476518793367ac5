import Synchronization

/// A clock that moves only when a test moves it, for what measures lifetimes by a `now` it is given.
public final class SteppedClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = Mutex<Duration>(.zero)

    public init() {}

    public var now: ContinuousClock.Instant { start + offset.withLock { $0 } }

    public func advance(_ by: Duration) { offset.withLock { $0 += by } }
}
