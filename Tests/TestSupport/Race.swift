import Synchronization

/// Runs `count` copies of `body` at once, each in a task of its own, and returns their results in the order of
/// their indexes. Each copy calls the `go` it is given where the race begins (after it has taken its connection
/// and set up its transaction, say): none goes on until every copy has arrived there, so what they race with
/// starts together. A copy that fails before its `go` releases the others after the barrier's timeout, and the
/// race throws its error.
public func race<T: Sendable>(
    _ count: Int,
    _ body: @escaping @Sendable (_ index: Int, _ go: @escaping @Sendable () async -> Void) async throws -> T
) async throws -> [T] {
    let barrier = Barrier(count: count)
    return try await withThrowingTaskGroup(of: (Int, T).self) { group in
        for index in 0..<count {
            group.addTask { (index, try await body(index, { await barrier.arrive() })) }
        }
        var results: [Int: T] = [:]
        for try await (index, result) in group { results[index] = result }
        return (0..<count).map { results[$0]! }
    }
}

/// A flag one task raises and others read: a side of a race that must stop when another is done, without being
/// cancelled mid-commit.
public final class Flag: Sendable {
    private let raised = Atomic(false)

    public init() {}

    public var isSet: Bool { raised.load(ordering: .acquiring) }

    public func set() { raised.store(true, ordering: .releasing) }
}
