import Logging
import Synchronization
import Testing

@testable import Server

@Suite("Log lines")
struct LineLogHandlerTests {
    /// Collects what a handler writes.
    final class Lines: TextOutputStream, Sendable {
        let written = Mutex<[String]>([])
        func write(_ string: String) { written.withLock { $0.append(string) } }
    }

    @Test("a line is what swift-log's StreamLogHandler writes, with the metadata set, merged and sorted")
    func sameLines() throws {
        let (ours, theirs) = (Lines(), Lines())
        var loggers = [
            Logger(label: "rbac") { LineLogHandler(label: $0, stream: ours) },
            Logger(label: "rbac") { StreamLogHandler(label: $0, stream: theirs) },
        ]
        for index in loggers.indices {
            loggers[index][metadataKey: "hb.request.id"] = "17"
            loggers[index][metadataKey: "b"] = "first"
            loggers[index][metadataKey: "b"] = "second"
            loggers[index][metadataKey: "gone"] = "x"
            loggers[index][metadataKey: "gone"] = nil
            loggers[index].info("request failed", metadata: ["error": "PostgresError", "a": "1"])
            loggers[index].warning("plain")
            loggers[index].debug("below the level: not written")
        }
        // Each line starts with the time to the second; the two loggers may have written in different seconds.
        func untimed(_ lines: Lines) -> [Substring] {
            lines.written.withLock { $0 }.map { $0.drop { $0 != " " } }
        }
        #expect(untimed(ours).count == 2)
        #expect(untimed(ours) == untimed(theirs))
        #expect(
            untimed(ours).first
                == " info rbac: a=1 b=second error=PostgresError hb.request.id=17 [ServerTests] request failed\n")
    }
}
