import CoreMetrics
import Foundation
import Synchronization

/// Times service operations and counts their outcomes through swift-metrics, as the seeds' PerformanceMonitor
/// did: `rbac_operation_duration_seconds` and `rbac_operations_total`, both labelled with the operation and
/// its outcome (`ok`, a refusal's code, or `error`).
public struct OperationMetrics: Sendable {
    private let timings: CountedTimings

    /// Without a factory, the process-wide one (`MetricsSystem.bootstrap`; a no-op until bootstrapped).
    public init(factory: (any MetricsFactory)? = nil) {
        timings = CountedTimings(
            counter: "rbac_operations_total", timer: "rbac_operation_duration_seconds",
            dimensions: ["operation", "outcome"], factory: factory)
    }

    /// Runs `body`, recording its duration and outcome (`success` when it returns).
    public func measure<T>(
        _ operation: String, outcome success: String = "ok", isolation: isolated (any _Concurrency.Actor)? = #isolation,
        _ body: () async throws -> T
    ) async throws -> T {
        let started = ContinuousClock.now
        do {
            let value = try await body()
            record(operation, outcome: success, duration: ContinuousClock.now - started)
            return value
        } catch {
            let outcome = (error as? any CodedError)?.codeName ?? "error"
            record(operation, outcome: outcome, duration: ContinuousClock.now - started)
            throw error
        }
    }

    /// Counts an operation that did no work worth timing (a cache hit, say), or times one measured elsewhere.
    public func record(_ operation: String, outcome: String, duration: Duration? = nil) {
        timings.record([operation, outcome], duration: duration)
    }

    /// The counter `record(operation, outcome:)` increments, looked up once: for a path that counts too often
    /// to look it up every time (a check answered from the cache).
    public func counter(_ operation: String, outcome: String) -> CoreMetrics.Counter {
        timings.handles([operation, outcome], timed: false).counter
    }
}

/// A counter and a timer with the same dimensions, whose swift-metrics handles are made once per set of
/// dimension values and then reused: making a handle is a lookup in the factory's registry, too dear for every
/// request. A timer is made only once something is timed, so that what is only counted (a check answered from
/// the cache) exports no empty histogram beside its count.
public final class CountedTimings: Sendable {
    private let counterLabel: String
    private let timerLabel: String
    private let dimensionNames: [String]
    private let factory: any MetricsFactory
    private let handles = Mutex<[[String]: (counter: CoreMetrics.Counter, timer: CoreMetrics.Timer?)]>([:])

    /// Without a factory, the process-wide one (`MetricsSystem.bootstrap`; a no-op until bootstrapped).
    public init(counter: String, timer: String, dimensions: [String], factory: (any MetricsFactory)? = nil) {
        counterLabel = counter
        timerLabel = timer
        dimensionNames = dimensions
        self.factory = factory ?? MetricsSystem.factory
    }

    /// Counts one event with these dimension values (in the order of the names given at init), and times it
    /// when `duration` is given.
    public func record(_ values: [String], duration: Duration?) {
        let (counter, timer) = handles(values, timed: duration != nil)
        counter.increment()
        if let duration, let timer {
            timer.recordNanoseconds(
                duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
        }
    }

    /// The counter of these dimension values, and with `timed` their timer, made on first use.
    func handles(_ values: [String], timed: Bool) -> (counter: CoreMetrics.Counter, timer: CoreMetrics.Timer?) {
        handles.withLock { handles in
            if let made = handles[values], made.timer != nil || !timed { return made }
            let dimensions = Array(zip(dimensionNames, values))
            let counter =
                handles[values]?.counter
                ?? CoreMetrics.Counter(label: counterLabel, dimensions: dimensions, factory: factory)
            let made = (
                counter: counter,
                timer: timed ? CoreMetrics.Timer(label: timerLabel, dimensions: dimensions, factory: factory) : nil
            )
            handles[values] = made
            return made
        }
    }
}
