import Collaboration
import Foundation
import Postgres
import Secrets
import Synchronization

/// Listens on `rbac_changes` (sql/functions/notifications.sql) and keeps the caches honest: each notification
/// drops what it names; a lost connection drops everything, and until the feed listens again the caches are not
/// trusted at all.
///
/// The feed vouches for the caches (`isTrusted`) only while all three hold:
/// - it listens, and its socket holds no input it has not read (a notification on its way in, or the server's
///   goodbye);
/// - what it has read is applied: it holds the caches (lookups find nothing) from before each read of the socket
///   until what the read brought is applied, on the connection's own thread, whatever the scheduler does;
/// - it is caught up to within `maxStaleness`. Notifications arrive in commit order, so hearing a heartbeat that
///   the feed sent through the database at T proves that every change committed before T has arrived. The feed
///   sends one every quarter of the bound; when the database or this host is too slow for them to come back in
///   time, the caches are not trusted and checks go to the database until they do.
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

    public let maxStaleness: Duration
    private let maxStalenessNanoseconds: Int64
    private let heartbeatInterval: Duration
    /// This feed's own channel for heartbeats, so that other instances do not hear them. Random, so that no one
    /// can send on it by name.
    private let heartbeatChannel: String
    /// The monotonic time (`Self.now()`) up to which every committed change is known to have been applied.
    private let caughtUp = Atomic<Int64>(.min)
    /// When the latest heartbeat was sent: a heartbeat claiming a later time was not ours, and is ignored.
    private let lastSent = Atomic<Int64>(.min)
    /// Called before each change notification is applied, while the caches are held: tests delay it.
    private let beforeApplying: @Sendable (String) -> Void

    /// `maxStaleness` bounds how long after a change committed elsewhere a cached answer may still ignore it.
    public convenience init(
        configuration: PostgresConfiguration, permissions: PermissionCache, keys: ServiceKeyCache? = nil,
        maxStaleness: Duration = .milliseconds(50)
    ) {
        self.init(
            configuration: configuration, permissions: permissions, keys: keys, maxStaleness: maxStaleness,
            heartbeatInterval: maxStaleness / 4, beforeApplying: { _ in })
    }

    /// For tests: heartbeats at another pace than a quarter of the bound, and a hook before each notice.
    init(
        configuration: PostgresConfiguration, permissions: PermissionCache, keys: ServiceKeyCache?,
        maxStaleness: Duration, heartbeatInterval: Duration, beforeApplying: @escaping @Sendable (String) -> Void
    ) {
        precondition(maxStaleness >= .milliseconds(1), "a staleness bound under 1 ms cannot be kept")
        var configuration = configuration
        configuration.applicationName = "rbac-change-feed"
        self.configuration = configuration
        self.permissions = permissions
        self.keys = keys
        self.maxStaleness = maxStaleness
        maxStalenessNanoseconds =
            maxStaleness.components.seconds * 1_000_000_000 + maxStaleness.components.attoseconds / 1_000_000_000
        self.heartbeatInterval = heartbeatInterval
        heartbeatChannel = "rbac_heartbeat_" + SecureRandom.bytes(count: 8).map { String(format: "%02x", $0) }.joined()
        self.beforeApplying = beforeApplying
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

    /// Whether cached answers may be used now (see the type's comment). A cache lookup also finds nothing while
    /// the feed holds it.
    public func isTrusted() -> Bool {
        var descriptor = pollfd(fd: watched, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) == 0 else { return false }
        return Self.now() - caughtUp.load(ordering: .acquiring) <= maxStalenessNanoseconds
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
                let notifications = try await connection.notifications(
                    channels: [Self.channel, heartbeatChannel], reading: receive)
                let socket = await connection.duplicateSocket()
                // Whatever changed before LISTEN took effect was never announced: start afresh. What is loaded
                // from now on reads every change committed so far, and every later one will be announced.
                dropEverything()
                caughtUp.store(Self.now(), ordering: .releasing)
                watch(socket)
                if socket >= 0 { close(socket) }
                reportedDown = nil
                onState(true, nil)
                delay = firstRetryDelay
                let heartbeat = Task { await beat() }
                // Each notification was applied as it was read (`receive`).
                do {
                    for try await _ in notifications {}
                } catch {
                    heartbeat.cancel()
                    throw error
                }
                heartbeat.cancel()
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

    /// Sends heartbeats through the database, one at a time, until cancelled, on a connection of its own
    /// (reopened when it fails: meanwhile the feed falls behind and is not trusted). The first is owed an interval
    /// after the feed starts listening, which catches it up: sent at once, it would arrive just as the first
    /// checks are asked, and turn the cache off for them while it is on the socket.
    private func beat() async {
        var connection: PostgresConnection?
        while !Task.isCancelled {
            try? await Task.sleep(for: heartbeatInterval)
            if Task.isCancelled { break }
            do {
                let open: PostgresConnection
                if let connection {
                    open = connection
                } else {
                    var configuration = configuration
                    configuration.applicationName = "rbac-change-feed-heartbeat"
                    open = try await PostgresConnection.connect(configuration)
                    connection = open
                }
                let sent = Self.now()
                lastSent.store(sent, ordering: .releasing)
                try await open.execute("SELECT pg_notify(\(heartbeatChannel), \(String(sent)))")
            } catch {
                await connection?.close()
                connection = nil
            }
        }
        await connection?.close()
    }

    /// Reads the socket and applies what it brought while holding the caches (see `isTrusted`). Runs on the
    /// listening connection's thread.
    private func receive(_ read: () -> [PostgresNotification]) {
        permissions.hold()
        keys?.hold()
        defer {
            keys?.release()
            permissions.release()
        }
        for notification in read() {
            if notification.channel == heartbeatChannel {
                guard let sent = Int64(notification.payload), sent <= lastSent.load(ordering: .acquiring) else {
                    continue
                }
                caughtUp.store(sent, ordering: .releasing)
            } else {
                beforeApplying(notification.payload)
                apply(notification.payload)
            }
        }
    }

    /// The monotonic clock, in nanoseconds.
    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
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
        case ("roles", 2...):
            guard let policyRevision = Int64(parts[1]) else { return dropEverything() }
            let roles = parts.count > 2 ? Set(parts.dropFirst(2).map(String.init)) : nil
            permissions.invalidate(roles: roles, policyRevision: policyRevision)
        case ("keys", 1):
            keys?.invalidateAll()
        default:
            dropEverything()
        }
    }
}
