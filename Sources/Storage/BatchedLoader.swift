import Synchronization

/// Turns single lookups that arrive together into few batched loads.
///
/// A lookup made while fewer than `concurrency` loads run starts a load at once, so alone it waits for
/// nothing. One made while they all run waits for the next free load, which takes every lookup waiting by
/// then (up to `maxBatch`): under load, batches grow where a queue of single lookups would.
///
/// Each load starts after every lookup it answers was made, so it sees every write committed before them.
/// Loads run in tasks of their own: a cancelled caller does not cancel a load that answers others too.
final class BatchedLoader<Key: Sendable, Value: Sendable>: Sendable {
    /// Loads the values of `keys`, one per key, in order, or throws for the whole batch.
    typealias Load = @Sendable (_ keys: [Key]) async throws -> [Value]

    private struct Lookup: Sendable {
        let key: Key
        let continuation: CheckedContinuation<Value, any Error>
    }

    private struct State: Sendable {
        var waiting: [Lookup] = []
        var running = 0
    }

    private let state = Mutex(State())
    private let concurrency: Int
    private let maxBatch: Int
    private let load: Load

    init(concurrency: Int, maxBatch: Int, load: @escaping Load) {
        precondition(concurrency > 0 && maxBatch > 0, "a loader needs room for one load of one key")
        self.concurrency = concurrency
        self.maxBatch = maxBatch
        self.load = load
    }

    func value(for key: Key) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let batch = state.withLock { state -> [Lookup]? in
                state.waiting.append(Lookup(key: key, continuation: continuation))
                guard state.running < concurrency else { return nil }
                state.running += 1
                return next(from: &state)
            }
            if let batch { Task { await run(batch) } }
        }
    }

    /// Lookups waiting for a load to take them.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Loads `batch`, then whatever waited meanwhile, until nothing waits.
    private func run(_ batch: [Lookup]) async {
        var batch = batch
        while true {
            do {
                let values = try await load(batch.map(\.key))
                precondition(
                    values.count == batch.count,
                    "a batched load returned \(values.count) values for \(batch.count) keys")
                for (lookup, value) in zip(batch, values) { lookup.continuation.resume(returning: value) }
            } catch {
                for lookup in batch { lookup.continuation.resume(throwing: error) }
            }
            guard
                let following = state.withLock({ state -> [Lookup]? in
                    guard !state.waiting.isEmpty else {
                        state.running -= 1
                        return nil
                    }
                    return next(from: &state)
                })
            else { return }
            batch = following
        }
    }

    private func next(from state: inout State) -> [Lookup] {
        guard state.waiting.count > maxBatch else {
            defer { state.waiting = [] }
            return state.waiting
        }
        defer { state.waiting.removeFirst(maxBatch) }
        return Array(state.waiting.prefix(maxBatch))
    }
}
