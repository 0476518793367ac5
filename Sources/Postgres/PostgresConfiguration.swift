import CLibPQ
import Foundation

/// Where and how to connect.
///
/// `connectionString` is a `postgres://` URL or a libpq `key=value` string; whatever it leaves out comes from
/// the standard `PG*` environment variables (`PGHOST`, `PGPORT`, `PGDATABASE`, `PGUSER`, `PGPASSWORD`, ...).
public struct PostgresConfiguration: Sendable {
    public var connectionString: String
    public var applicationName: String
    /// Seconds to wait for a connection to open; 0, for ever (as libpq reads it).
    public var connectTimeout: Int
    /// Settings every connection opens with, by name, as `SET` would make them: `statement_timeout` (in
    /// milliseconds without a unit), `rbac.actor_label`, ...
    public var settings: [String: String]

    /// Without `connectTimeout`, what the connection string's `connect_timeout` or `PGCONNECT_TIMEOUT` says, else
    /// 10 seconds rather than libpq's for ever.
    public init(
        connectionString: String = "", applicationName: String = "rbac", connectTimeout: Int? = nil,
        settings: [String: String] = [:]
    ) {
        self.connectionString = connectionString
        self.applicationName = applicationName
        self.connectTimeout =
            connectTimeout ?? Self.resolvedFields(of: connectionString)["connect_timeout"].flatMap { Int($0) } ?? 10
        self.settings = settings
    }

    /// Checks the connection string's syntax without connecting.
    public func validate() throws {
        guard !connectionString.isEmpty else { return }
        // libpq parses blanks as no settings at all, then connects to a database named by them.
        guard connectionString.contains(where: { !$0.isWhitespace }) else {
            throw PostgresError(.connection, message: "invalid database URL: it is blank")
        }
        if let misplaced = Self.misplacedAt(in: connectionString) {
            throw PostgresError(.connection, message: "invalid database URL: \(misplaced)")
        }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &errorMessage) else {
            let reason = errorMessage.map { String(cString: $0) } ?? "it cannot be parsed"
            errorMessage.map { PQfreemem($0) }
            throw PostgresError(
                .connection,
                message: "invalid database URL: \(reason.trimmingTrailingNewlines)")
        }
        var fields: [String: String] = [:]
        Self.collect(options, into: &fields)
        PQconninfoFree(options)
        // libpq reads the port only when it connects, and its message then quotes what it read: in a URL whose
        // host is missing, the password.
        let ports = fields["port"].map { $0.split(separator: ",", omittingEmptySubsequences: false) } ?? []
        guard ports.allSatisfy({ $0.isEmpty || UInt16($0) ?? 0 > 0 }) else {
            throw PostgresError(.connection, message: "invalid database URL: a port is not a number from 1 to 65535")
        }
    }

    /// `duration` as a setting in milliseconds takes it (`lock_timeout`): `1500ms`.
    public static func milliseconds(_ duration: Duration) -> String { "\(Int(duration / .milliseconds(1)))ms" }

    /// Whether the connection string's `options`, or else PGOPTIONS, set server setting `name` (`-c name=value`,
    /// `-cname=value` or `--name=value`, a dash standing for each underscore as the server takes it).
    public func givesOption(_ name: String) -> Bool {
        guard let options = Self.resolvedFields(of: connectionString)["options"] else { return false }
        let spelled = name.replacingOccurrences(of: "_", with: "[_-]")
        return options.contains(try! Regex("(^|\\s)(-c\\s*|--)\(spelled)="))
    }

    /// Whether the connection string itself holds a password (a URL's `user:password@`, or a `password` field).
    public var carriesPassword: Bool { Self.fields(of: connectionString)["password"]?.isEmpty == false }

    /// Why a URL's `@` is not where the user and password end, if it is not. libpq ends the user and password at
    /// the first `@` or `/`, so a password holding either, not percent-encoded, would be read as a host, a port
    /// or a database, which its messages then quote.
    private static func misplacedAt(in url: String) -> String? {
        guard let scheme = url.firstMatch(of: /^postgres(ql)?:\/\//) else { return nil }
        let rest = url[scheme.range.upperBound...].prefix { $0 != "?" }
        let authority = rest.prefix { $0 != "/" }
        if authority.filter({ $0 == "@" }).count > 1 {
            return "it holds more than one '@' before the host; write an '@' in the user or password as %40"
        }
        if !authority.contains("@"), rest.dropFirst(authority.count).contains("@") {
            return "it holds an '@' after a '/'; write a '/' in the user or password as %2F, and an '@' as %40"
        }
        return nil
    }

    /// `text` with the password of every connection string in it replaced: `postgres://user:[redacted]@...`,
    /// `password=[redacted]` (a key=value field, or a URL's query parameter).
    public static func redactingPasswords(in text: String) -> String {
        text.replacing(/(?i)(postgres(?:ql)?:\/\/[^\/\s@:]*:)[^\s@]*@/) { "\($0.output.1)[redacted]@" }
            .replacing(/(?i)(password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s&]*)/) { "\($0.output.1)[redacted]" }
            // The fragments libpq quotes when a field does not parse: a stray word or a bad value may be a password.
            .replacing(
                #/
                (percent-encoded\ token:\  | percent-encoded\ value:\  | missing\ "="\ after\  |
                 separator\ "="\ in\ URI\ query\ parameter:\  | invalid\ integer\ value\ )
                "[^"]*"
                /#
            ) { "\($0.output.1)\"[redacted]\"" }
    }

    /// The same connection (user, database, password, TLS, settings) to another server: a Citus worker, say.
    public func reaching(host: String, port: Int) -> PostgresConfiguration {
        // Rebuilt as key=value without the string's own host, hostaddr and port: appended fields would override
        // host and port, but not a hostaddr, which libpq connects to instead of the host. An empty hostaddr
        // keeps PGHOSTADDR from standing in for it: libpq takes a variable only for a field the string omits.
        let kept = Self.fields(of: connectionString).filter { !["host", "hostaddr", "port"].contains($0.key) }
        var moved = self
        moved.connectionString =
            (kept.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            + [("host", host), ("hostaddr", ""), ("port", String(port))])
            .map { "\($0)='\($1.replacing("\\", with: "\\\\").replacing("'", with: "\\'"))'" }
            .joined(separator: " ")
        return moved
    }

    /// Host, port, database and user as libpq will resolve them; never the password.
    public var redactedDescription: String {
        let fields = Self.resolvedFields(of: connectionString)
        let host = fields["host"] ?? fields["hostaddr"] ?? "localhost"
        let port = fields["port"] ?? "5432"
        let user = fields["user"].map { "\($0)@" } ?? ""
        let database = fields["dbname"] ?? fields["user"] ?? ""
        return host.hasPrefix("/")
            ? "\(user)\(database) via socket \(host) port \(port)" : "postgres://\(user)\(host):\(port)/\(database)"
    }

    /// The connection string's fields over libpq's defaults (the `PG*` variables among them).
    private static func resolvedFields(of connectionString: String) -> [String: String] {
        var fields: [String: String] = [:]
        if let defaults = PQconndefaults() {
            Self.collect(defaults, into: &fields)
            PQconninfoFree(defaults)
        }
        fields.merge(Self.fields(of: connectionString)) { _, given in given }
        return fields
    }

    /// The fields a connection string gives (none for an empty or malformed one).
    static func fields(of connectionString: String) -> [String: String] {
        var fields: [String: String] = [:]
        if !connectionString.isEmpty, let options = PQconninfoParse(connectionString, nil) {
            collect(options, into: &fields)
            PQconninfoFree(options)
        }
        return fields
    }

    private static func collect(_ options: UnsafeMutablePointer<PQconninfoOption>, into fields: inout [String: String])
    {
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val, value.pointee != 0 {
                fields[String(cString: keyword)] = String(cString: value)
            }
            option += 1
        }
    }

    /// How a TCP connection notices a server gone without a word (its host vanished, or the network drops all
    /// it sends): data or keepalive probes unanswered for 15 s end it, and the statement waiting on it fails, where
    /// the kernel's defaults take a quarter of an hour, with every connection of the pool held so and the service
    /// answering 503 long after the server is back. A connection string that sets one of them keeps its own;
    /// libpq ignores them on a Unix socket.
    static let deadServerDefaults = [
        ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "15000"),
    ]

    /// Whether connections made with `connectionString` (Citus's `citus.node_conninfo`, say) give up on a server
    /// that stopped answering while a statement is in flight, as this process's do: it sets a `tcp_user_timeout`
    /// above 0. Keepalives alone do not: TCP probes only an idle connection, never one waiting for its data to be
    /// acknowledged.
    public static func givesUpOnSilentServers(_ connectionString: String) -> Bool {
        (fields(of: connectionString)["tcp_user_timeout"].flatMap { Int($0) } ?? 0) > 0
    }

    /// Calls `body` with the NULL-terminated keyword and value arrays `PQconnectdbParams` takes.
    func withConnectParameters<T>(
        _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) -> T
    ) -> T {
        var parameters: [(String, String)] = [
            ("application_name", applicationName),
            ("client_encoding", "UTF8"),
            ("connect_timeout", String(connectTimeout)),
        ]
        if !connectionString.isEmpty {
            // First, so that with expand_dbname its fields are expanded and the ones below override them.
            parameters.insert(("dbname", connectionString), at: 0)
        }
        let stated = Self.fields(of: connectionString)
        parameters += Self.deadServerDefaults.filter { stated[$0.0] == nil }
        if !settings.isEmpty {
            // After the options the URL or PGOPTIONS give, which this parameter replaces, so that they still apply.
            let given = Self.resolvedFields(of: connectionString)["options"].map { [$0] } ?? []
            parameters.append(("options", (given + [Self.options(settings)]).joined(separator: " ")))
        }
        let keys = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keys.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keyPointers = keys.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        return keyPointers.withUnsafeBufferPointer { k in
            valuePointers.withUnsafeBufferPointer { v in body(k.baseAddress!, v.baseAddress!) }
        }
    }

    /// libpq's `options` for `settings`: `-c name=value` each, with a backslash before each backslash and
    /// white-space character, which the server would otherwise take for the end of the argument.
    static func options(_ settings: [String: String]) -> String {
        func escaped(_ text: String) -> String {
            var result = ""
            for scalar in text.unicodeScalars {
                if scalar == "\\" || scalar.properties.isWhitespace { result.append("\\") }
                result.unicodeScalars.append(scalar)
            }
            return result
        }
        return settings.sorted { $0.key < $1.key }.map { "-c \(escaped($0.key))=\(escaped($0.value))" }
            .joined(separator: " ")
    }
}

extension String {
    var trimmingTrailingNewlines: String {
        var text = self
        while text.last?.isNewline == true { text.removeLast() }
        return text
    }

    /// libpq's multi-line messages as one line. A line that begins a sentence (a hint: "Is the server running
    /// ...?") follows a full stop; one that goes on with the sentence before it ("before or while processing the
    /// request."), a space.
    var asOneLine: String {
        split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .reduce(into: "") { line, next in
                if line.isEmpty {
                    line = next
                } else {
                    let ended = line.last.map { ".?!:".contains($0) } ?? true
                    line += (next.first?.isUppercase == true && !ended ? ". " : " ") + next
                }
            }
    }
}
