import ChildProcess
import Foundation
import Testing

/// `--help` of every command the tree holds, read from the built `rbac`.
@Suite("rbac --help", .timeLimit(.minutes(1)))
struct HelpTests {
    /// The commands a help text lists below its own.
    static func subcommands(of help: String) -> [String] {
        guard let listing = help.components(separatedBy: "SUBCOMMANDS:").dropFirst().first else { return [] }
        // The listing ends at its first blank line; a subcommand's line starts two spaces in, its abstract's
        // continuation lines further.
        let lines = listing.split(separator: "\n", omittingEmptySubsequences: false).dropFirst()
        return lines.prefix { !$0.isEmpty }.compactMap { line in
            guard line.hasPrefix("  "), let first = line.dropFirst(2).first, first.isLetter else { return nil }
            return line.split(separator: " ").first.map(String.init)
        }
    }

    @Test("every command's help shows an example of that command, from the top to each leaf")
    func everyLevelHasAnExample() async throws {
        var level: [[String]] = [[]]
        var seen = 0
        // A level of the tree at a time, its commands' help read at once.
        while !level.isEmpty, seen < 500 {
            let helps = try await withThrowingTaskGroup(of: ([String], ChildProcess.Result).self) { group in
                for path in level {
                    group.addTask { (path, try await ChildProcess.run(CLITests.executable.path, path + ["--help"])) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            level = []
            for (path, run) in helps {
                let command = (["rbac"] + path).joined(separator: " ")
                #expect(run.status == 0, "\(command) --help: \(run.errorOutput)")
                // The example may wrap onto a second line, so words are compared, not lines. It stands in the
                // discussion, before USAGE, and may pipe something into the command.
                let words = run.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                    .replacing("Examples: ", with: "Example: ")
                let example = words.components(separatedBy: "Example: ").dropFirst().first?
                    .components(separatedBy: " USAGE: ").first
                let shown = example.map { ($0 + " ").contains(command + " ") } ?? false
                #expect(shown, "\(command) --help has no example of \(command)")
                level += Self.subcommands(of: run.output).map { path + [$0] }
            }
            seen += helps.count
        }
        // The top, its commands, and the nouns and verbs below them.
        #expect(seen > 90, "only \(seen) commands were found; the walk stopped early")
    }
}
