import Foundation

/// A TCP socket listening on 127.0.0.1 at a port the kernel picks: something that holds a port, or a stand-in
/// server. The caller closes it.
public func listeningOnLoopback(backlog: Int32 = 16) throws -> (socket: Int32, port: UInt16) {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let listening = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(socket, $0, length) == 0 && listen(socket, backlog) == 0 && getsockname(socket, $0, &length) == 0
        }
    }
    guard socket >= 0, listening else {
        let reason = String(cString: strerror(errno))
        if socket >= 0 { close(socket) }
        throw TestSetupError("cannot listen on 127.0.0.1: \(reason)")
    }
    return (socket, UInt16(bigEndian: address.sin_port))
}

/// A blocking TCP connection to 127.0.0.1 at `port`, for tests that speak raw bytes. A read waits at most
/// `timeout` seconds. Closed when released. Sendable to hand to a thread: one thread at a time uses it.
public final class LoopbackConnection: @unchecked Sendable {
    private let fd: Int32

    public init(port: Int, timeout: Int = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSetupError("socket: \(String(cString: strerror(errno)))") }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TestSetupError("connect: \(reason)")
        }
    }

    deinit { close(fd) }

    /// Sends all of `bytes`.
    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestSetupError("send: \(String(cString: strerror(errno)))") }
            sent += n
        }
    }

    /// What arrives next, up to 64 KiB; empty when the peer has closed the connection. Throws when nothing
    /// arrives in time.
    public func receive() throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0, errno == ECONNRESET { return [] }
        guard n >= 0 else { throw TestSetupError("recv: \(String(cString: strerror(errno)))") }
        return Array(buffer[..<n])
    }

    /// Whether anything has arrived that is not read yet, without waiting.
    public var hasUnread: Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
    }

    /// Whether the peer has closed the connection, without waiting: what it sent before is left unread.
    public var isClosedByPeer: Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }
}

/// Runs `body`, which blocks (on sockets, or sleeping between writes), on a thread of its own. Not on Dispatch's
/// global queues: on Linux, Swift's tasks run on the same few threads, and a body blocking them for seconds
/// would stall the server it talks to.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
