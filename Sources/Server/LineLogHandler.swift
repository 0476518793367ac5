import Foundation
import Logging

/// Writes log lines exactly as swift-log's `StreamLogHandler` does, but renders the metadata only for a line it
/// writes. `StreamLogHandler` renders all of its metadata again whenever any of it changes, and Hummingbird
/// sets a request id on the logger of every request, so every request paid for a rendering that, at the usual
/// levels, no line ever used.
public struct LineLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let stream: any TextOutputStream & Sendable

    /// A handler for `label` that writes to `stream`.
    public init(label: String, stream: any TextOutputStream & Sendable) {
        self.label = label
        self.stream = stream
        self.metadataProvider = LoggingSystem.metadataProvider
    }

    /// A handler for `label` that writes to standard error, as swift-log's default does.
    public static func standardError(label: String) -> LineLogHandler {
        LineLogHandler(label: label, stream: StandardError())
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var writer = StreamLogHandler(label: label, stream: stream, metadataProvider: metadataProvider)
        writer.metadata = metadata
        writer.log(event: event)
    }
}

/// Standard error, unbuffered: each line is one write, so lines from different threads never interleave. A line
/// that cannot be written is dropped, as StreamLogHandler drops it (`write(_: Data)` would trap instead).
private struct StandardError: TextOutputStream, Sendable {
    func write(_ string: String) {
        try? FileHandle.standardError.write(contentsOf: Data(string.utf8))
    }
}
