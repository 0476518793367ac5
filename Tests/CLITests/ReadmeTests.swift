import ChildProcess
import Foundation
import TestSupport
import Testing

/// The README's walk through the `rbac` command, run as it stands against a fresh database, so that a command
/// renamed or an option changed fails here rather than in a reader's terminal.
@Suite("The README", .timeLimit(.minutes(2)))
struct ReadmeTests {
    /// The first `sh` block under the heading "The `rbac` command".
    private static func walkthrough() throws -> [Step] {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let heading = try #require(lines.firstIndex { $0.hasPrefix("## The `rbac` command") })
        let open = try #require(lines[heading...].firstIndex(of: "```sh"))
        let close = try #require(lines[(open + 1)...].firstIndex(of: "```"))
        var steps: [Step] = []
        var command = ""
        for index in (open + 1)..<close {
            // A comment starts at " # "; no command of the walkthrough has one inside quotes.
            let parts = lines[index].split(separator: " # ", maxSplits: 1, omittingEmptySubsequences: false)
            let code = parts[0].trimmingCharacters(in: .whitespaces)
            let comment = parts.count > 1 ? String(parts[1]) : ""
            if code.hasSuffix("\\") {
                command += String(code.dropLast()) + " "
                continue
            }
            command += code
            guard !command.isEmpty else { continue }
            steps.append(Step(line: index + 1, command: command, comment: comment))
            command = ""
        }
        return steps
    }

    @Test("the walk through the rbac command runs as written, each command with the outcome its comment gives")
    func walkthroughRuns() async throws {
        let steps = try Self.walkthrough()
        #expect(steps.count >= 20 && steps.contains { $0.status != 0 } && steps.contains { $0.sets != nil })
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // One shell runs every step, so the variables carry on; each step's output, status and variable go to
        // files of their own. pipefail: a failing rbac is not hidden behind the jq that reads its output.
        var script = "set -u -o pipefail\n"
        for (number, step) in steps.enumerated() {
            script += "{ \(step.command)\n} >\(number).out 2>\(number).err\necho $? >\(number).status\n"
            if let variable = step.sets { script += "printf %s \"${\(variable):-}\" >\(number).value\n" }
        }
        try script.write(to: directory.appendingPathComponent("walkthrough.sh"), atomically: true, encoding: .utf8)
        try await TestDatabase.withFresh { configuration in
            var environment = ProcessInfo.processInfo.environment
            environment["PATH"] =
                CLITests.executable.deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "")
            environment["DATABASE_URL"] = configuration.connectionString
            let run = try await ChildProcess.run(
                "/bin/bash", ["-c", "cd \"$0\" && exec bash walkthrough.sh", directory.path], environment: environment)
            #expect(run.status == 0, "\(run.errorOutput)")
            for (number, step) in steps.enumerated() {
                func file(_ suffix: String) -> String {
                    (try? String(contentsOf: directory.appendingPathComponent("\(number).\(suffix)"), encoding: .utf8))
                        ?? ""
                }
                let context = "README.md:\(step.line): \(step.command)\n\(file("err"))"
                #expect(
                    Int32(file("status").trimmingCharacters(in: .whitespacesAndNewlines)) == step.status, "\(context)")
                for words in step.prints { #expect(file("out").contains(words), "\(context)") }
                if step.sets != nil {
                    let value = file("value")
                    #expect(!value.isEmpty && value != "null", "\(context)")
                }
            }
        }
    }
}

/// One command of the walkthrough, and what its comment promises.
private struct Step {
    let line: Int
    let command: String
    let comment: String

    /// `exit N` in the comment, else 0.
    var status: Int32 { comment.firstMatch(of: /exit (\d+)/).flatMap { Int32($0.output.1) } ?? 0 }
    /// The `"words"` in the comment, which it prints.
    var prints: [String] { comment.matches(of: /"([^"]+)"/).map { String($0.output.1) } }
    /// The variable it sets (`C=$(rbac ...)`), if any.
    var sets: String? { command.firstMatch(of: /^([A-Z]+)=\$\(/).map { String($0.output.1) } }
}
