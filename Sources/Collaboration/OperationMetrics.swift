import CoreMetrics
import Foundation

/// Times service operations and counts their outcomes through swift-metrics, as the seeds' PerformanceMonitor
/// did: `rbac_operation_duration_seconds` and `rbac_operations_total`, both labelled with the operation and
/// its outcome (`ok`, a `CollaborationError` code, or `error`).
public struct OperationMetrics: Sendable {
    private let factory: any MetricsFactory

    /// Without a factory, the process-wide one (`MetricsSystem.bootstrap`; a no-op until bootstrapped).
    public init(factory: (any MetricsFactory)? = nil) {
        self.factory = factory ?? MetricsSystem.factory
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
            let outcome = (error as? CollaborationError)?.code.rawValue ?? "error"
            record(operation, outcome: outcome, duration: ContinuousClock.now - started)
            throw error
        }
    }

    /// Counts an operation that did no work worth timing (a cache hit, say), or times one measured elsewhere.
    public func record(_ operation: String, outcome: String, duration: Duration? = nil) {
        let dimensions = [("operation", operation), ("outcome", outcome)]
        Counter(label: "rbac_operations_total", dimensions: dimensions, factory: factory).increment()
        if let duration {
            let nanoseconds =
                duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
            Timer(label: "rbac_operation_duration_seconds", dimensions: dimensions, factory: factory)
                .recordNanoseconds(nanoseconds)
        }
    }
}
