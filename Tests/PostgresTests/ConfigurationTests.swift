import CLibPQ
import ChildProcess
import Foundation
import TestSupport
import Testing

@testable import Postgres

@Suite("Connection strings")
struct ConfigurationTests {
    @Test(
        "a password never shows in a message about a connection string",
        arguments: [
            ("postgres://bob:S3cretPw@[::1", "postgres://bob:[redacted]@[::1"),
            ("POSTGRESQL://bob:S3cretPw@db/x", "POSTGRESQL://bob:[redacted]@db/x"),
            ("host=db password=S3cretPw user=bob", "host=db password=[redacted] user=bob"),
            ("host=db password = 'S3cret Pw' user=bob", "host=db password = [redacted] user=bob"),
            ("host=db password='S3cret \\' Pw' x=1", "host=db password=[redacted] x=1"),
            (
                "postgres://db/x?password=S3cretPw&sslmode=require",
                "postgres://db/x?password=[redacted]&sslmode=require"
            ),
            ("postgres://bob@db/x", "postgres://bob@db/x"),
            (#"invalid percent-encoded token: "S3cret%ZZ""#, #"invalid percent-encoded token: "[redacted]""#),
            (#"missing "=" after "Pw" in"#, #"missing "=" after "[redacted]" in"#),
            (#"invalid integer value "S3cret" for"#, #"invalid integer value "[redacted]" for"#),
        ])
    func redaction(text: String, expected: String) {
        #expect(PostgresConfiguration.redactingPasswords(in: "failed: \"\(text)\"") == "failed: \"\(expected)\"")
    }

    @Test(
        "a malformed connection string is refused without its password, or any part of it",
        arguments: [
            ("postgres://bob:S3cretPw@[::1", "IPv6"),
            ("postgres://bob:S3cret%ZZPw@db/x", "percent-encoded token"),
            ("postgres://bob:S3cret%00Pw@db/x", "%00"),
            ("postgres://bob:S3cret@Pw@db/x", "write an '@' in the user or password as %40"),
            ("postgres://bob:S3cret/Pw@db/x", "write a '/' in the user or password as %2F"),
            ("host=db password=S3cret Pw", #"missing "=""#),
            ("postgres://bob:S3c?re/tPw@db/x", "URI query parameter"),
            ("postgres://bob:S3cretPw", "a port is not a number from 1 to 65535"),
            ("postgres://bob@db:5432,db2:S3cretPw/x", "a port is not a number"),
            ("host=db port=0 password=S3cretPw", "a port is not a number"),
        ])
    func malformed(connectionString: String, reason: String) {
        #expect {
            try PostgresConfiguration(connectionString: connectionString).validate()
        } throws: { error in
            let text = "\(error) \(String(reflecting: error))"
            return text.contains("invalid database URL") && text.contains(reason) && !text.contains("S3cret")
                && !text.contains("Pw")
        }
    }

    @Test(
        "a password is found wherever a connection string holds it",
        arguments: [
            ("postgres://bob:S3cretPw@db/x", true), ("postgres://db/x?password=S3cretPw", true),
            ("host=db password='S3cret Pw'", true), ("postgres://bob@db/x", false), ("postgres://bob:@db/x", false),
            ("host=db user=bob", false), ("", false),
        ])
    func password(connectionString: String, carries: Bool) {
        #expect(PostgresConfiguration(connectionString: connectionString).carriesPassword == carries)
    }

    @Test("an '@' in a URL's query or after a '?' in its password, and ports left out, are read as libpq reads them")
    func atSignsKept() throws {
        for url in [
            "postgres://bob:S3c?ret@db/x", "postgres://db/x?user=bob@corp", "postgres://bob%40corp:pw@db/x",
            "postgres://db1:5432,db2/x", "host=/tmp port=65535",
        ] {
            try PostgresConfiguration(connectionString: url).validate()
        }
    }
}

@Suite("Another server, the same connection")
struct ReachingTests {
    @Test(
        "only the host and port change",
        arguments: [
            "postgres://bob:S3cret%27Pw@db.internal:6432/app?sslmode=require&hostaddr=10.0.0.9",
            "host=db.internal hostaddr=10.0.0.9 port=6432 user=bob password='S3cret\\'Pw' dbname=app sslmode=require",
        ])
    func reaching(connectionString: String) {
        let worker = PostgresConfiguration(connectionString: connectionString, applicationName: "app")
            .reaching(host: "worker-2", port: 5433)
        #expect(
            PostgresConfiguration.fields(of: worker.connectionString) == [
                "host": "worker-2", "port": "5433", "user": "bob", "password": "S3cret'Pw", "dbname": "app",
                "sslmode": "require",
            ])
        #expect(worker.applicationName == "app")
    }

    @Test(
        "libpq's messages of several lines read as one: a hint after a full stop, a sentence's rest after a space",
        arguments: [
            (
                "connection to server at \"db\" (10.0.0.5), port 5432 failed: Connection refused\n\tIs the server "
                    + "running on that host and accepting TCP/IP connections?\n",
                "connection to server at \"db\" (10.0.0.5), port 5432 failed: Connection refused. Is the server "
                    + "running on that host and accepting TCP/IP connections?"
            ),
            (
                "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n"
                    + "\tbefore or while processing the request.\n",
                "server closed the connection unexpectedly. This probably means the server terminated abnormally "
                    + "before or while processing the request."
            ),
            ("FATAL:  database \"x\" does not exist\n", "FATAL:  database \"x\" does not exist"),
        ])
    func oneLine(message: String, expected: String) {
        #expect(message.asOneLine == expected)
    }

    @Test("a connection string's connect_timeout is kept, else PGCONNECT_TIMEOUT's, else 10 s; one set in code wins")
    func connectTimeout() {
        let unstated = ProcessInfo.processInfo.environment["PGCONNECT_TIMEOUT"].flatMap { Int($0) } ?? 10
        #expect(PostgresConfiguration(connectionString: "host=db").connectTimeout == unstated)
        #expect(PostgresConfiguration(connectionString: "host=db connect_timeout=3").connectTimeout == 3)
        #expect(PostgresConfiguration(connectionString: "postgres://db/x?connect_timeout=0").connectTimeout == 0)
        #expect(
            PostgresConfiguration(connectionString: "host=db connect_timeout=3", connectTimeout: 2).connectTimeout == 2)
    }

    @Test("PGHOSTADDR does not send it elsewhere")
    func hostAddressVariable() async throws {
        // psql, with libpq's own resolution of the variables: the disposable server listens on 127.0.0.1 only,
        // so a connection that takes PGHOSTADDR's 127.0.0.2 is refused.
        let port = try #require(ProcessInfo.processInfo.environment["PGPORT"].flatMap { Int($0) })
        let environment = ProcessInfo.processInfo.environment.merging(["PGHOSTADDR": "127.0.0.2"]) { $1 }
        func connects(_ connectionString: String) async throws -> Bool {
            let result = try await ChildProcess.run(
                "/usr/bin/env", ["psql", "-X", "-At", "-c", "SELECT 1", connectionString], environment: environment)
            return result.status == 0 && result.output == "1\n"
        }
        let server = try TestDatabase.server()
        #expect(try await !connects("host=127.0.0.1 port=\(port) dbname=postgres"))
        #expect(try await connects(server.reaching(host: "127.0.0.1", port: port).connectionString))
    }
}

@Suite("A server gone quiet")
struct DeadServerTests {
    /// What libpq set on the socket of a TCP connection opened with `connectionString` to the disposable server.
    static func socketOptions(_ connectionString: String) throws -> (userTimeout: Int32, idle: Int32, keepalive: Int32)
    {
        let configuration = PostgresConfiguration(connectionString: connectionString)
        let connection = try #require(configuration.withConnectParameters { PQconnectdbParams($0, $1, 1) })
        defer { PQfinish(connection) }
        try #require(PQstatus(connection) == CONNECTION_OK, "\(String(cString: PQerrorMessage(connection)))")
        func option(_ level: Int32, _ name: Int32) -> Int32 {
            var (value, size) = (Int32(-1), socklen_t(MemoryLayout<Int32>.size))
            return getsockopt(PQsocket(connection), level, name, &value, &size) == 0 ? value : -1
        }
        let tcp = Int32(IPPROTO_TCP)
        return (option(tcp, TCP_USER_TIMEOUT), option(tcp, TCP_KEEPIDLE), option(SOL_SOCKET, SO_KEEPALIVE))
    }

    @Test("a TCP connection gives up on a server that stops answering after 15 s, unless its string says otherwise")
    func timeouts() throws {
        let port = try #require(ProcessInfo.processInfo.environment["PGPORT"].flatMap { Int($0) })
        let server = try TestDatabase.server().reaching(host: "127.0.0.1", port: port).connectionString
        let defaults = try Self.socketOptions(server)
        #expect(defaults.userTimeout == 15_000 && defaults.idle == 10 && defaults.keepalive == 1)
        let own = try Self.socketOptions(server + " tcp_user_timeout=2500 keepalives_idle=30")
        #expect(own.userTimeout == 2_500 && own.idle == 30 && own.keepalive == 1)
    }

    @Test(
        "a connection string gives up on a silent server with a tcp_user_timeout above 0, keepalives or not",
        arguments: [
            ("sslmode=require tcp_user_timeout=15000", true), ("tcp_user_timeout = '1'", true), ("", false),
            ("sslmode=require", false), ("keepalives_idle=10 keepalives_interval=5 keepalives_count=3", false),
            ("tcp_user_timeout=0", false), ("tcp_user_timeout=x", false), ("tcp_user_timeout=", false),
        ])
    func givesUpOnSilentServers(connectionString: String, givesUp: Bool) {
        #expect(PostgresConfiguration.givesUpOnSilentServers(connectionString) == givesUp)
    }

    @Test(
        "a setting is given in the URL's options however the server would read it, and no other name matches",
        arguments: [
            ("postgres:///db?options=-c%20lock_timeout%3D5s", true), ("options='-c lock_timeout=0'", true),
            ("options='-clock_timeout=1s'", true), ("options='--lock-timeout=1s'", true),
            ("options='-c statement_timeout=1s -c lock_timeout=1s'", true), ("options='-c deadlock_timeout=1s'", false),
            ("options='-c lock_timeouts=1s'", false), ("dbname=x", false), ("", false),
        ])
    func givesOption(connectionString: String, gives: Bool) {
        #expect(PostgresConfiguration(connectionString: connectionString).givesOption("lock_timeout") == gives)
    }
}
