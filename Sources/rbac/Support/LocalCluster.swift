import ChildProcess
import Foundation
import Postgres

/// rbac's own PostgreSQL cluster, used when no database is configured: created on first use under a data
/// directory, started on demand, reached over a Unix socket in that directory only (no TCP port).
///
/// The data directory is `$RBAC_DATA_DIR`, else `/var/lib/rbac` for root, else `$XDG_DATA_HOME/rbac`
/// (`~/.local/share/rbac`). As root, the server runs as the `postgres` OS user, since PostgreSQL refuses root.
struct LocalCluster {
    let root: URL
    var clusterDirectory: URL { root.appendingPathComponent("postgres") }
    var dataDirectory: URL { clusterDirectory.appendingPathComponent("data") }
    var socketDirectory: URL { clusterDirectory.appendingPathComponent("socket") }
    var logFile: URL { clusterDirectory.appendingPathComponent("server.log") }
    static let databaseName = "rbac"
    static let port = 5432

    static func `default`() -> LocalCluster {
        let environment = ProcessInfo.processInfo.environment
        if let directory = environment["RBAC_DATA_DIR"], !directory.isEmpty {
            return LocalCluster(root: URL(fileURLWithPath: directory))
        }
        if getuid() == 0 {
            return LocalCluster(root: URL(fileURLWithPath: "/var/lib/rbac"))
        }
        let dataHome =
            environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share").path
        return LocalCluster(root: URL(fileURLWithPath: dataHome).appendingPathComponent("rbac"))
    }

    var configuration: PostgresConfiguration {
        PostgresConfiguration(
            connectionString: "host=\(socketDirectory.path) port=\(Self.port) user=postgres dbname=\(Self.databaseName)"
        )
    }

    /// Creates the cluster if needed, starts it if it is not running, creates the `rbac` database, and returns
    /// how to reach it. Concurrent rbac processes serialise on a lock file.
    func start() async throws -> PostgresConfiguration {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let lock = try FileLock(path: root.appendingPathComponent("postgres.lock").path)
        defer { lock.unlock() }

        let binaries = try Self.serverBinaries()
        if !FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
            try await create(binaries)
            note("created a local PostgreSQL cluster in \(clusterDirectory.path)")
        }
        if try await runAsOwner(binaries.appendingPathComponent("pg_ctl"), ["status", "-D", dataDirectory.path]) != 0 {
            let status = try await runAsOwner(
                binaries.appendingPathComponent("pg_ctl"),
                ["start", "-w", "-t", "60", "-D", dataDirectory.path, "-l", logFile.path])
            guard status == 0 else {
                throw CommandFailure(
                    .databaseUnavailable, "the local PostgreSQL server did not start; see \(logFile.path)")
            }
            note(
                "started the local PostgreSQL server (data and socket in \(clusterDirectory.path), log \(logFile.path))"
            )
        }
        try await createDatabaseIfMissing()
        return configuration
    }

    private func create(_ binaries: URL) async throws {
        try? FileManager.default.removeItem(at: clusterDirectory)
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: socketDirectory, withIntermediateDirectories: true)
        if getuid() == 0 {
            guard try await run(URL(fileURLWithPath: "/bin/chown"), ["-R", "postgres:", clusterDirectory.path]) == 0
            else {
                throw CommandFailure(.databaseUnavailable, "cannot hand \(clusterDirectory.path) to the postgres user")
            }
        }
        let status = try await runAsOwner(
            binaries.appendingPathComponent("initdb"),
            [
                "-D", dataDirectory.path, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8",
                "--no-instructions",
            ])
        guard status == 0 else {
            throw CommandFailure(.databaseUnavailable, "initdb failed for \(dataDirectory.path); see \(logFile.path)")
        }
        // Only the cluster's owner (and root) can reach a socket in this directory; no TCP listener at all.
        let settings = """

            # Added by rbac: a private server reached only through the socket directory below.
            listen_addresses = ''
            port = \(Self.port)
            unix_socket_directories = '\(socketDirectory.path)'
            unix_socket_permissions = 0700

            """
        let conf = try FileHandle(forWritingTo: dataDirectory.appendingPathComponent("postgresql.conf"))
        defer { try? conf.close() }
        try conf.seekToEnd()
        try conf.write(contentsOf: Data(settings.utf8))
    }

    private func createDatabaseIfMissing() async throws {
        var maintenance = configuration
        maintenance.connectionString = "host=\(socketDirectory.path) port=\(Self.port) user=postgres dbname=postgres"
        let connection = try await PostgresConnection.connect(maintenance)
        defer { Task { await connection.close() } }
        let existing = try await connection.query("SELECT 1 FROM pg_database WHERE datname = \(Self.databaseName)")
        if existing.isEmpty {
            try await connection.execute("CREATE DATABASE \(identifier: Self.databaseName)")
        }
    }

    /// The newest installed PostgreSQL server's `bin` directory.
    static func serverBinaries() throws -> URL {
        let base = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        let newest = versions.compactMap(Int.init).sorted().last
        if let newest {
            let bin = URL(fileURLWithPath: "\(base)/\(newest)/bin")
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        throw CommandFailure(
            .databaseUnavailable,
            "no database configured and no PostgreSQL server installed to start one; "
                + "install it (apt-get install -y postgresql) or pass --database-url")
    }

    private func runAsOwner(_ executable: URL, _ arguments: [String]) async throws -> Int32 {
        if getuid() == 0 {
            return try await run(
                URL(fileURLWithPath: "/sbin/runuser"), ["-u", "postgres", "--", executable.path] + arguments)
        }
        return try await run(executable, arguments)
    }

    /// Runs a program with its output appended to the server log (see `ChildProcess` on descriptors).
    private func run(_ executable: URL, _ arguments: [String]) async throws -> Int32 {
        if !FileManager.default.fileExists(atPath: logFile.path) {
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
            if getuid() == 0 { _ = chown(logFile.path, Self.postgresUserID(), gid_t(bitPattern: -1)) }
        }
        do {
            return try await ChildProcess.run(executable.path, arguments, output: .append(to: logFile.path)).status
        } catch let failure as ChildProcessError {
            throw CommandFailure(.databaseUnavailable, failure.description)
        }
    }

    private static func postgresUserID() -> uid_t {
        getpwnam("postgres")?.pointee.pw_uid ?? uid_t(bitPattern: -1)
    }

    private func note(_ text: String) {
        printError("rbac: \(text)")
    }
}

/// An exclusive `flock` on a file, held until `unlock`.
private struct FileLock {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = open(path, O_CREAT | O_RDWR, 0o644)
        guard descriptor >= 0 else { throw CommandFailure(.databaseUnavailable, "cannot open lock file \(path)") }
        guard flock(descriptor, LOCK_EX) == 0 else {
            close(descriptor)
            throw CommandFailure(.databaseUnavailable, "cannot lock \(path)")
        }
    }

    func unlock() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
