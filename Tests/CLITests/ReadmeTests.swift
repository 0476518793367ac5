import ChildProcess
import Foundation
import TestSupport
import Testing

/// The README's examples, run as they stand against a fresh database: the walk through the `rbac` command, then
/// the permission check over HTTP against `rbac serve`; and the budget's walkthrough in docs/architecture.md. A
/// command renamed, an option changed or an answer that looks different fails here rather than in a reader's
/// terminal. They log in as a production login would: a member of rbac_operator, no superuser (which passes
/// every privilege and row-level security check); a superuser migrates.
@Suite("The README", .timeLimit(.minutes(2)))
struct ReadmeTests {
    /// The first `sh` block of `file` under `heading` that holds `marker`.
    private static func block(
        of file: String = "README.md", under heading: String, holding marker: String
    ) throws -> [Step] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var start = try #require(lines.firstIndex { $0.hasPrefix(heading) })
        while true {
            let open = try #require(lines[start...].firstIndex(of: "```sh"), "no sh block holds \(marker)")
            let close = try #require(lines[(open + 1)...].firstIndex(of: "```"))
            if lines[open..<close].contains(where: { $0.contains(marker) }) {
                return steps(lines, (open + 1)..<close, of: file)
            }
            start = close + 1
        }
    }

    private static func steps(_ lines: [String], _ range: Range<Int>, of file: String) -> [Step] {
        var steps: [Step] = []
        var command = ""
        for index in range {
            // A line of its own starting "#   " shows what the command before it prints.
            if lines[index].hasPrefix("#   "), !steps.isEmpty {
                steps[steps.count - 1].shows.append(String(lines[index].dropFirst(4)))
                continue
            }
            // A comment starts at " # "; no command of the README has one inside quotes.
            let parts = lines[index].split(separator: " # ", maxSplits: 1, omittingEmptySubsequences: false)
            let code = parts[0].trimmingCharacters(in: .whitespaces)
            if code.hasSuffix("\\") {
                command += String(code.dropLast()) + " "
                continue
            }
            command += code
            guard !command.isEmpty else { continue }
            steps.append(
                Step(file: file, line: index + 1, command: command, comment: parts.count > 1 ? String(parts[1]) : ""))
            command = ""
        }
        return steps
    }

    @Test("the CLI walkthrough and the HTTP check run as written, each command with the outcome the README gives")
    func examplesRun() async throws {
        let cli = try Self.block(under: "## The `rbac` command", holding: "rbac migrate")
        let http = try Self.block(under: "## The HTTP service", holding: "curl")
        #expect(cli.count >= 20 && cli.contains { $0.status != 0 } && cli.contains { $0.sets != nil })
        #expect(http.contains { !$0.shows.isEmpty })
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await CLITests.withJWTSecretFile { secret in
            try await TestDatabase.withFresh { configuration in
                let database = configuration.connectionString
                // serve needs a migrated database (distributed on Citus); the walkthrough's own `rbac migrate`
                // then has nothing to do.
                let migrated = try await TestDatabase.settingUp {
                    try await CLITests.rbac(CLITests.migrate, database: database)
                }
                try #require(migrated.status == 0, "\(migrated.stderr)")
                try await CLITests.asOperatorLogin(configuration) { database in
                    let (serve, port) = try await CLITests.serve(
                        ["--jwt-secret-file", secret], database: database, errorLog: "/dev/null",
                        until: { $0.contains("listening on") })
                    defer { Task { await serve.stop() } }
                    try #require(serve.ready, "serve did not start: \(serve.lines)")
                    let steps =
                        cli
                        + http.map {
                            var step = $0
                            step.command = step.command.replacing("localhost:8080", with: "localhost:\(port)")
                            return step
                        }
                    try await Self.run(steps, in: directory, database: database)
                    await serve.stop()
                }
            }
        }
    }

    @Test("the budget's walkthrough in docs/architecture.md runs as written")
    func budgetExamplesRun() async throws {
        let steps = try Self.block(of: "docs/architecture.md", under: "## The budget", holding: "rbac budget")
        #expect(steps.count >= 15 && steps.contains { $0.status != 0 } && steps.contains { $0.sets != nil })
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("budget-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await TestDatabase.withFresh { configuration in
            let database = configuration.connectionString
            let migrated = try await TestDatabase.settingUp {
                try await CLITests.rbac(CLITests.migrate, database: database)
            }
            try #require(migrated.status == 0, "\(migrated.stderr)")
            try await CLITests.asOperatorLogin(configuration) { try await Self.run(steps, in: directory, database: $0) }
        }
    }

    /// Runs `steps` in one shell, so that the variables carry on, and checks each step's outcome. Each step's
    /// output, status and variable go to files of their own. pipefail: a failing rbac is not hidden behind the
    /// jq that reads its output.
    private static func run(_ steps: [Step], in directory: URL, database: String) async throws {
        var script = "set -u -o pipefail\n"
        for (number, step) in steps.enumerated() {
            script += "{ \(step.command)\n} >\(number).out 2>\(number).err\necho $? >\(number).status\n"
            if let variable = step.sets { script += "printf %s \"${\(variable):-}\" >\(number).value\n" }
        }
        try script.write(to: directory.appendingPathComponent("examples.sh"), atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = CLITests.executable.deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "")
        environment["DATABASE_URL"] = database
        let run = try await ChildProcess.run(
            "/bin/bash", ["-c", "cd \"$0\" && exec bash examples.sh", directory.path], environment: environment)
        #expect(run.status == 0, "\(run.errorOutput)")
        for (number, step) in steps.enumerated() {
            func file(_ suffix: String) -> String {
                (try? String(contentsOf: directory.appendingPathComponent("\(number).\(suffix)"), encoding: .utf8))
                    ?? ""
            }
            let context = "\(step.file):\(step.line): \(step.command)\n\(file("out"))\(file("err"))"
            #expect(Int32(file("status").trimmingCharacters(in: .whitespacesAndNewlines)) == step.status, "\(context)")
            for words in step.prints + step.shows { #expect(file("out").contains(words), "\(context)") }
            if step.sets != nil {
                let value = file("value")
                #expect(!value.isEmpty && value != "null", "\(context)")
            }
        }
    }
}

/// One command of an example, and what the README says of it.
private struct Step {
    let file: String
    let line: Int
    var command: String
    let comment: String
    /// The lines shown under it (`#   ...`), which it prints.
    var shows: [String] = []

    /// `exit N` in the comment, else 0.
    var status: Int32 { comment.firstMatch(of: /exit (\d+)/).flatMap { Int32($0.output.1) } ?? 0 }
    /// The `"words"` in the comment, which it prints.
    var prints: [String] { comment.matches(of: /"([^"]+)"/).map { String($0.output.1) } }
    /// The variable it sets (`C=$(rbac ...)`), if any.
    var sets: String? { command.firstMatch(of: /^([A-Z]+)=\$\(/).map { String($0.output.1) } }
}
