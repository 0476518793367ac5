import Collaboration
import Foundation
import Postgres

/// Listens on `rbac_changes` (see sql/0009) and keeps the caches honest: each notification drops what it names;
/// a lost connection drops everything, and until the feed listens again the caches are not trusted at all.
///
/// `isTrusted` is also false while the notification socket holds input the feed has not read yet (a
/// notification on its way in, or the server's goodbye), so no check is answered from the cache in the moment
/// between a change arriving and the feed acting on it.
public final class ChangeFeed: Sendable {
    public static let channel = "rbac_changes"

    private let configuration: PostgresConfiguration
    private let permissions: PermissionCache
    private let keys: ServiceKeyCache?
    /// What `isTrusted` polls: while the feed listens, the listening connection's socket; otherwise a pipe that
    /// always has input. The number is never closed while the feed lives, only pointed at one or the other by
    /// `dup2` (which the kernel does at once), so polling it needs no lock and never meets a reused number.
    private let watched: Int32
    /// The read end of a pipe holding one byte that nobody reads.
    private let alwaysReadable: Int32

    public init(configuration: PostgresConfiguration, permissions: PermissionCache, keys: ServiceKeyCache? = nil) {
        var configuration = configuration
        configuration.applicationName = "rbac-change-feed"
        self.configuration = configuration
        self.permissions = permissions
        self.keys = keys
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0, write(ends[1], "!", 1) == 1 else {
            fatalError("ChangeFeed: cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        close(ends[1])
        alwaysReadable = ends[0]
        watched = dup(ends[0])
        guard watched >= 0 else { fatalError("ChangeFeed: cannot dup a pipe: \(String(cString: strerror(errno)))") }
    }

    deinit {
        close(watched)
        close(alwaysReadable)
    }

    /// Whether cached answers may be used now.
    public func isTrusted() -> Bool {
        var descriptor = pollfd(fd: watched, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Listens until the task is cancelled, reconnecting (after `firstRetryDelay`, doubling up to 2 s) whenever
    /// the connection is lost. `onState` hears, for logs, each time the feed starts listening and each time it
    /// stops (with the error, if there was one), but not a stop asked for. While the database stays down, a
    /// failed retry is reported only when it fails differently from the last one reported.
    public func run(
        firstRetryDelay: Duration = .milliseconds(100),
        onState: @escaping @Sendable (_ listening: Bool, _ error: (any Error)?) -> Void = { _, _ in }
    ) async {
        var delay = firstRetryDelay
        /// How the feed last reported itself down, while it is down: nil once it listens.
        var reportedDown: String?
        func reportDown(_ error: (any Error)?) {
            let description = error.map { "\($0)" } ?? ""
            guard description != reportedDown else { return }
            reportedDown = description
            onState(false, error)
        }
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration)
                let notifications = try await connection.notifications(channels: [Self.channel])
                let socket = await connection.duplicateSocket()
                // Whatever changed before LISTEN took effect was never announced: start afresh.
                dropEverything()
                watch(socket)
                if socket >= 0 { close(socket) }
                reportedDown = nil
                onState(true, nil)
                delay = firstRetryDelay
                for try await notification in notifications {
                    apply(notification.payload)
                }
                distrust()
                if Task.isCancelled { break }  // stopped, not lost
                reportDown(nil)
            } catch {
                distrust()
                if Task.isCancelled { break }
                reportDown(error)
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
        distrust()
    }

    private func distrust() {
        watch(alwaysReadable)
        dropEverything()
    }

    /// Points `watched` at `descriptor`, or at the pipe when `descriptor` is not open (its connection closed).
    private func watch(_ descriptor: Int32) {
        for source in [descriptor, alwaysReadable] where source >= 0 {
            var result: Int32
            repeat { result = dup2(source, watched) } while result < 0 && errno == EINTR
            if result >= 0 { return }
        }
        fatalError("ChangeFeed: cannot dup2: \(String(cString: strerror(errno)))")
    }

    private func dropEverything() {
        permissions.invalidateAll()
        keys?.invalidateAll()
    }

    /// Acts on one payload; anything not understood drops everything, to be safe.
    func apply(_ payload: String) {
        let parts = payload.split(separator: " ")
        switch (parts.first, parts.count) {
        case ("couple", 2), ("couple", 3):
            guard let couple = UUID(parsing: String(parts[1])) else { return dropEverything() }
            permissions.invalidate(couple: couple, revision: parts.count == 3 ? Int64(parts[2]) : nil)
        case ("keys", 1):
            keys?.invalidateAll()
        default:
            dropEverything()
        }
    }
}
