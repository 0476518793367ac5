import Collaboration
import Foundation
import Postgres
import Synchronization

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
    /// The listening connection's socket, duplicated for `poll`; -1 while not listening. Closed only under the
    /// lock, so `isTrusted` never polls a descriptor number that was reused.
    private let socket = Mutex<Int32>(-1)

    public init(configuration: PostgresConfiguration, permissions: PermissionCache, keys: ServiceKeyCache? = nil) {
        var configuration = configuration
        configuration.applicationName = "rbac-change-feed"
        self.configuration = configuration
        self.permissions = permissions
        self.keys = keys
    }

    /// Whether cached answers may be used now.
    public func isTrusted() -> Bool {
        socket.withLock { descriptor in
            guard descriptor >= 0 else { return false }
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            return poll(&watched, 1, 0) == 0
        }
    }

    /// Listens until the task is cancelled, reconnecting (after 0.1 s, doubling up to 2 s) whenever the
    /// connection is lost. `onState` hears each change of state, for logs.
    public func run(onState: @escaping @Sendable (_ listening: Bool, _ error: (any Error)?) -> Void = { _, _ in })
        async
    {
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration)
                let notifications = try await connection.notifications(channels: [Self.channel])
                let descriptor = await connection.duplicateSocket()
                // Whatever changed before LISTEN took effect was never announced: start afresh.
                dropEverything()
                socket.withLock { $0 = descriptor }
                onState(true, nil)
                delay = .milliseconds(100)
                for try await notification in notifications {
                    apply(notification.payload)
                }
                distrust()
                if Task.isCancelled { break }  // stopped, not lost
                onState(false, nil)
            } catch {
                distrust()
                if Task.isCancelled { break }
                onState(false, error)
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(2))
        }
        distrust()
    }

    private func distrust() {
        socket.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
        dropEverything()
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
