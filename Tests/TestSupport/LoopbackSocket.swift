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
