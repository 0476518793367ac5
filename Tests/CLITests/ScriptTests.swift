import ChildProcess
import Foundation
import TestSupport
import Testing

@Suite("The test scripts")
struct ScriptTests {
    /// A port in the ephemeral range can be held by any client connection open at the moment, and a server then
    /// cannot listen on it: the likely reason a disposable cluster once failed to start in the middle of the suite.
    @Test("free-port picks ports below the ephemeral range, from which client connections take theirs")
    func freePortAvoidsEphemeralPorts() async throws {
        let range = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let ephemeralLow = try #require(range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) })
        let script = repositoryRoot.appendingPathComponent("scripts/free-port").path
        for _ in 0..<50 {
            let result = try await ChildProcess.run(script, [])
            #expect(result.status == 0, "\(result.errorOutput)")
            let port = try #require(Int(result.output.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect((1024..<ephemeralLow).contains(port))
        }
    }
}
