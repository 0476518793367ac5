import Dispatch
import Foundation

/// Runs another program and waits for it without blocking Swift's cooperative thread pool.
///
/// Why not Foundation's `Process`: its `waitUntilExit` and pipe reads block the calling thread. On a machine
/// with two cores the cooperative pool has two threads, so two tasks waiting on children stall every other task,
/// including one a child may be waiting for (a child's migration blocked on a transaction this process holds,
/// say): a deadlock. Here the wait runs on a dispatch queue of its own, and the caller's task is suspended.
///
/// The child gets `/dev/null` as input and no other descriptor of this process: a daemon it starts (the server
/// `pg_ctl start` launches) cannot hold this process's files open.
public enum ChildProcess {
    public struct Result: Sendable {
        public let status: Int32
        /// Standard output, when captured; empty when appended to a file.
        public let output: String
        /// Standard error, when captured; empty when appended to a file.
        public let errorOutput: String
    }

    /// Where the child's standard output and error go.
    public enum Output: Sendable {
        /// Captured separately and returned in the result.
        case capture
        /// Both appended to this file.
        case append(to: String)
        /// Standard output to a pipe's write end, standard error appended to a file.
        case pipe(Int32, errorLog: String)
    }

    /// Runs `executable` with `arguments` and returns once it has exited. The status is the exit code, or 128 plus
    /// the signal that ended it. `environment` nil keeps this process's.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        output: Output = .capture
    ) async throws -> Result {
        let captured = output.capturing
        defer {
            for path in captured { unlink(path) }
        }
        let pid = try spawn(executable, arguments, environment: environment, output: output, captured: captured)
        let status = await withCheckedContinuation { continuation in
            DispatchQueue(label: "rbac.child-process").async {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                // WIFEXITED / WEXITSTATUS, which are macros Swift does not import.
                continuation.resume(returning: status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f))
            }
        }
        func read(_ index: Int) -> String {
            guard captured.count > index, let data = FileManager.default.contents(atPath: captured[index]) else {
                return ""
            }
            return String(decoding: data, as: UTF8.self)
        }
        return Result(status: status, output: read(0), errorOutput: read(1))
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String]?, output: Output,
        captured: [String]
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        switch output {
        case .capture:
            posix_spawn_file_actions_addopen(&actions, 1, captured[0], O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, captured[1], O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        case .append(let path):
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        case .pipe(let writeEnd, let errorLog):
            posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
            posix_spawn_file_actions_addopen(&actions, 2, errorLog, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        // Closing a descriptor that is already closed is not an error for glibc's posix_spawn.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            if let descriptor = Int32(name), descriptor > 2 {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
        }

        // The child starts with no signal blocked and the usual handlers: a dispatch thread that spawns it blocks
        // signals, and a child that inherited that mask would never see the SIGTERM that stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { variables?.forEach { free($0) } }
        var pid = pid_t()
        let spawned =
            variables.map { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else {
            throw ChildProcessError(executable: executable, reason: String(cString: strerror(spawned)))
        }
        return pid
    }
}

extension ChildProcess {
    /// A child left running, such as a server a test talks to.
    public struct Running: Sendable {
        public let pid: pid_t
        /// What it wrote to standard output up to and including the line `start` waited for (all of it, when it
        /// exited first).
        public let lines: [String]
        /// Whether the line `start` waited for came (false: the child exited first).
        public let ready: Bool

        /// Sends SIGTERM and waits for it to exit.
        public func stop() async {
            kill(pid, SIGTERM)
            await withCheckedContinuation { continuation in
                DispatchQueue(label: "rbac.child-process").async {
                    var status: Int32 = 0
                    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                    continuation.resume()
                }
            }
        }
    }

    /// Starts `executable` and returns once it has written a line of standard output that `ready` accepts (a
    /// server saying where it listens), or has exited. Its standard error is appended to `errorLog`; its output
    /// after that line is read and dropped, so it never blocks on a full pipe, or with `hangingUp` not read at
    /// all: the pipe is closed, as when whoever read a server's log has gone.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, errorLog: String,
        hangingUp: Bool = false, until ready: @escaping @Sendable (String) -> Bool = { _ in true }
    ) async throws -> Running {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw ChildProcessError(executable: executable, reason: String(cString: strerror(errno)))
        }
        let pid: pid_t
        do {
            pid = try spawn(
                executable, arguments, environment: environment, output: .pipe(ends[1], errorLog: errorLog),
                captured: [])
        } catch {
            close(ends[0])
            close(ends[1])
            throw error
        }
        close(ends[1])
        let readEnd = ends[0]
        // A cancelled wait (a test past its time limit) kills the child, which ends the wait with a closed pipe: a
        // line that never comes fails the test rather than hanging it.
        let (lines, found) = await withTaskCancellationHandler {
            await Self.readLines(readEnd, hangingUp: hangingUp, until: ready)
        } onCancel: {
            kill(pid, SIGKILL)
        }
        return Running(pid: pid, lines: lines, ready: found)
    }

    /// The lines read from `readEnd` until one that `ready` accepts (true), or the end (false); the rest is read and
    /// dropped on a thread of its own, or with `hangingUp` the pipe is closed.
    private static func readLines(
        _ readEnd: Int32, hangingUp: Bool, until ready: @escaping @Sendable (String) -> Bool
    ) async -> ([String], Bool) {
        await withCheckedContinuation { (continuation: CheckedContinuation<([String], Bool), Never>) in
            DispatchQueue(label: "rbac.child-process").async {
                var lines: [String] = []
                var line: [UInt8] = []
                var byte: UInt8 = 0
                var answered = false
                while read(readEnd, &byte, 1) == 1 {
                    guard !answered else { continue }
                    guard byte == UInt8(ascii: "\n") else {
                        line.append(byte)
                        continue
                    }
                    lines.append(String(decoding: line, as: UTF8.self))
                    line = []
                    if ready(lines[lines.count - 1]) {
                        answered = true
                        // Hung up before returning, so the caller's next step meets a closed pipe.
                        if hangingUp { break }
                        continuation.resume(returning: (lines, true))
                    }
                }
                close(readEnd)
                if !answered || hangingUp { continuation.resume(returning: (lines, answered)) }
            }
        }
    }
}

extension ChildProcess.Output {
    /// Fresh paths for captured standard output and error.
    fileprivate var capturing: [String] {
        guard case .capture = self else { return [] }
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("rbac-child-\(UUID().uuidString)")
        return [base.path + ".out", base.path + ".err"]
    }
}

/// The program could not be started at all (missing, not executable).
public struct ChildProcessError: Error, CustomStringConvertible {
    public let executable: String
    public let reason: String
    public var description: String { "cannot run \(executable): \(reason)" }
}
