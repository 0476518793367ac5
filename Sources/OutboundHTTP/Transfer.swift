import CCurl
import Foundation
import Synchronization

/// One libcurl transfer on a thread of its own, which cancelling the task that waits for it ends at once. The
/// transfer runs through a multi handle whose wait the cancellation wakes, and libcurl's progress callback ends it:
/// with `curl_easy_perform` a stopping process would wait out a slow peer's whole timeout (15 s for a webhook, 30
/// for an email), or leave the message it was sending claimed until its lease ran out.
final class Transfer: Sendable {
    private struct State {
        var cancelled = false
        /// The multi handle while `perform` runs: the cancellation wakes it, under the lock, so never once freed.
        var multi: MultiHandle?
    }
    /// `@unchecked`: the lock is what makes the one use of the handle from another thread, the wake-up, safe.
    private struct MultiHandle: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
    }
    private let state = Mutex(State())

    private init() {}

    /// Runs `body`, which sets up an easy handle and hands it to `perform`, on a serial queue of its own (`label`):
    /// a thread that may block for a whole timeout, never one of a shared pool's few.
    static func run<T: Sendable>(label: String, _ body: @escaping @Sendable (Transfer) throws -> T) async throws -> T {
        let transfer = Transfer()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue(label: label).async { continuation.resume(with: Result { try body(transfer) }) }
            }
        } onCancel: {
            transfer.state.withLock { state in
                state.cancelled = true
                if let multi = state.multi { curl_multi_wakeup(multi.pointer) }
            }
        }
    }

    /// Why the multi handle that runs a transfer failed, in libcurl's words: not the transfer's own outcome.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ code: CURLMcode) { description = "libcurl: " + String(cString: curl_multi_strerror(code)) }
    }

    /// `curl_easy_perform`, ended by the waiting task's cancellation: `CancellationError` when that came before
    /// the transfer ended, `Failure` when the multi handle running it failed.
    func perform(_ curl: UnsafeMutableRawPointer) throws -> CURLcode {
        guard let multi = curl_multi_init() else { throw Failure(CURLM_OUT_OF_MEMORY) }
        state.withLock { $0.multi = MultiHandle(pointer: multi) }
        defer {
            state.withLock { $0.multi = nil }
            curl_multi_cleanup(multi)
        }
        // `self` outlives the easy handle's use: `run` holds it until `body` returns.
        let context = Unmanaged.passUnretained(self).toOpaque()
        let progress = rbac_curl_set_progress(curl, Self.goOn, context)
        guard progress == CURLE_OK else { return progress }
        try check(curl_multi_add_handle(multi, curl))
        defer { curl_multi_remove_handle(multi, curl) }
        var running: Int32 = 1
        while true {
            try check(curl_multi_perform(multi, &running))
            if running == 0 { break }
            // Back when the socket is ready, one of libcurl's timeouts falls due or a cancellation wakes it; the
            // second is only an upper bound.
            try check(curl_multi_poll(multi, nil, 0, 1000, nil))
        }
        let outcome = rbac_curl_multi_outcome(multi)
        if outcome == CURLE_ABORTED_BY_CALLBACK { throw CancellationError() }
        return outcome
    }

    private func check(_ code: CURLMcode) throws(Failure) {
        guard code == CURLM_OK else { throw Failure(code) }
    }

    /// Non-zero, which ends the transfer, once the waiting task is cancelled.
    private static let goOn: rbac_curl_progress_callback = { context, _, _, _, _ in
        Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue().state.withLock { $0.cancelled } ? 1 : 0
    }
}
