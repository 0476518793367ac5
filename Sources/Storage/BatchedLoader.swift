import Synchronization

/// Turns single lookups that arrive together into few batched loads.
///
/// A lookup made while fewer than `concurrency` drains run starts a drain at once, so alone it waits for
/// nothing. One made while they all run waits for a drain to take it: a drain loads batch after batch, each of
/// every lookup waiting by then (up to `maxBatch`), until none waits. Under load, batches grow where a queue of
/// single lookups would, and a drain goes from one batch to the next without handing its thread back.
///
/// Each batch is taken after every lookup in it was made, so its load sees every write committed before them.
/// Drains run in tasks of their own: a cancelled caller does not cancel a load that answers others too.
final class BatchedLoader<Key: Sendable, Value: Sendable>: Sendable {
    /// Loads the batches `batches` hands out, one after another, until it hands out nil; answers each before
    /// taking the next. Throwing fails the batch taken and not answered, if any; a drain that stops early
    /// (throwing or not) is followed by another, if lookups still wait.
    typealias Drain = @Sendable (_ batches: Batches) async throws -> Void

    fileprivate struct Lookup: Sendable {
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
    private let drain: Drain

    init(concurrency: Int, maxBatch: Int, drain: @escaping Drain) {
        precondition(concurrency > 0 && maxBatch > 0, "a loader needs room for one load of one key")
        self.concurrency = concurrency
        self.maxBatch = maxBatch
        self.drain = drain
    }

    func value(for key: Key) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let batch = state.withLock { state -> [Lookup]? in
                state.waiting.append(Lookup(key: key, continuation: continuation))
                guard state.running < concurrency else { return nil }
                state.running += 1
                return take(from: &state)
            }
            if let batch { Task { await run(batch) } }
        }
    }

    /// Lookups waiting for a drain to take them.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Drains, starting with `first`, and again for as long as a drain stops while lookups wait.
    private func run(_ first: [Lookup]) async {
        var first = first
        while true {
            let batches = Batches(loader: self, first: first)
            do {
                try await drain(batches)
            } catch {
                batches.fail(error)
            }
            guard let following = batches.stop() else { return }
            first = following
        }
    }

    /// The batch a running drain takes next; nil when nothing waits, and then the drain no longer counts as
    /// running.
    fileprivate func nextBatch() -> [Lookup]? {
        state.withLock { state in
            guard !state.waiting.isEmpty else {
                state.running -= 1
                return nil
            }
            return take(from: &state)
        }
    }

    /// Up to `maxBatch` of the waiting lookups, oldest first.
    private func take(from state: inout State) -> [Lookup] {
        guard state.waiting.count > maxBatch else {
            defer { state.waiting = [] }
            return state.waiting
        }
        defer { state.waiting.removeFirst(maxBatch) }
        return Array(state.waiting.prefix(maxBatch))
    }

    /// The batches of one drain: `next` takes one, `answer` answers it.
    final class Batches: Sendable {
        private struct State {
            /// Taken and not yet answered.
            var current: [Lookup] = []
            /// Not yet handed out by `next`: the batch the drain starts with.
            var first: [Lookup]?
            /// `next` found nothing waiting, and the drain is over.
            var isFinished = false
        }

        private let loader: BatchedLoader
        private let state: Mutex<State>

        fileprivate init(loader: BatchedLoader, first: [Lookup]) {
            self.loader = loader
            state = Mutex(State(first: first))
        }

        /// The keys of the next batch, or nil when nothing waits; then the drain is over and must return.
        /// Answer each batch before taking the next.
        func next() -> [Key]? {
            state.withLock { state in
                precondition(state.current.isEmpty, "a batch taken before the last one was answered")
                if let first = state.first {
                    state.first = nil
                    state.current = first
                } else if !state.isFinished {
                    state.current = loader.nextBatch() ?? []
                    state.isFinished = state.current.isEmpty
                }
                return state.isFinished ? nil : state.current.map(\.key)
            }
        }

        /// Answers the batch last taken: with one value per key, in order, or with an error for every key.
        func answer(_ result: Result<[Value], any Error>) {
            let batch = state.withLock { state in
                defer { state.current = [] }
                return state.current
            }
            switch result {
            case .success(let values):
                precondition(
                    values.count == batch.count,
                    "a batched load returned \(values.count) values for \(batch.count) keys")
                for (lookup, value) in zip(batch, values) { lookup.continuation.resume(returning: value) }
            case .failure(let error):
                for lookup in batch { lookup.continuation.resume(throwing: error) }
            }
        }

        /// Fails whatever batch is taken and not answered (the first, if the drain never took it).
        fileprivate func fail(_ error: any Error) {
            let batch = state.withLock { state in
                defer {
                    state.current = []
                    state.first = nil
                }
                return state.current + (state.first ?? [])
            }
            for lookup in batch { lookup.continuation.resume(throwing: error) }
        }

        /// Ends the drain. Returns the batch the next drain starts with if it stopped while lookups wait.
        fileprivate func stop() -> [Lookup]? {
            fail(Stopped())
            return state.withLock { state in
                guard !state.isFinished else { return nil }
                state.isFinished = true
                return loader.nextBatch()
            }
        }
    }

    /// What a lookup gets when a drain returned, without an error, leaving it taken and not answered.
    struct Stopped: Error {}
}
