/// A SQLSTATE code, such as `23505` for a unique violation.
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let uniqueViolation = SQLState("23505")
    public static let foreignKeyViolation = SQLState("23503")
    public static let notNullViolation = SQLState("23502")
    public static let checkViolation = SQLState("23514")
    public static let exclusionViolation = SQLState("23P01")
    public static let serializationFailure = SQLState("40001")
    public static let deadlockDetected = SQLState("40P01")
    public static let queryCanceled = SQLState("57014")
    public static let adminShutdown = SQLState("57P01")
    public static let crashShutdown = SQLState("57P02")
    public static let cannotConnectNow = SQLState("57P03")
    /// A lock waited for longer than `lock_timeout` allows.
    public static let lockNotAvailable = SQLState("55P03")
    public static let raiseException = SQLState("P0001")
    public static let invalidTextRepresentation = SQLState("22P02")
    /// In a UTF-8 database, a text value with a NUL byte: the one valid Swift string PostgreSQL refuses.
    public static let characterNotInRepertoire = SQLState("22021")
    public static let undefinedTable = SQLState("42P01")
    public static let undefinedColumn = SQLState("42703")
    public static let undefinedFunction = SQLState("42883")
    public static let invalidSchemaName = SQLState("3F000")
    public static let insufficientPrivilege = SQLState("42501")

    /// The two-character class, e.g. `23` for integrity constraint violations.
    public var errorClass: Substring { rawValue.prefix(2) }

    /// The condition name PostgreSQL's documentation uses, where known.
    public var name: String? { Self.names[rawValue] }

    public var description: String {
        name.map { "\(rawValue) (\($0))" } ?? rawValue
    }

    private static let names: [String: String] = [
        "23505": "unique_violation", "23503": "foreign_key_violation", "23502": "not_null_violation",
        "23514": "check_violation", "23P01": "exclusion_violation", "40001": "serialization_failure",
        "40P01": "deadlock_detected", "57014": "query_canceled", "57P01": "admin_shutdown",
        "57P02": "crash_shutdown", "57P03": "cannot_connect_now", "P0001": "raise_exception",
        "22P02": "invalid_text_representation", "42P01": "undefined_table",
        "42501": "insufficient_privilege", "42601": "syntax_error", "42883": "undefined_function",
        "42703": "undefined_column", "25P02": "in_failed_sql_transaction", "3D000": "invalid_catalog_name",
        "28P01": "invalid_password", "53300": "too_many_connections", "08006": "connection_failure",
        "3F000": "invalid_schema_name", "55P03": "lock_not_available",
    ]
}

/// An error from the database or from this client.
///
/// `description` never shows bound values or row data: it names the SQLSTATE, the constraint and,
/// for errors about the statement rather than the data, the server's message. The server's
/// message, detail and hint are in their own fields and in `debugDescription`.
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The server refused a statement; `sqlState` says why.
        case server
        /// Could not connect, or the connection broke.
        case connection
        /// A value could not be decoded into the requested Swift type.
        case decoding
        /// No pooled connection became free within the pool's wait limit.
        case poolTimeout
        /// The pool or connection was closed.
        case closed
        /// The query was malformed before it reached the server.
        case invalidQuery
    }

    public var kind: Kind
    public var sqlState: SQLState?
    /// The server's primary message, or this client's own.
    public var message: String
    public var detail: String?
    public var hint: String?
    public var schema: String?
    public var table: String?
    public var column: String?
    public var constraint: String?
    /// The connection failed after a statement that commits on its own (outside a transaction) or a `COMMIT` was
    /// sent: it may have been done although no answer said so.
    public var unconfirmed = false

    public init(
        _ kind: Kind, sqlState: SQLState? = nil, message: String, detail: String? = nil, hint: String? = nil,
        schema: String? = nil, table: String? = nil, column: String? = nil, constraint: String? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        // libpq quotes a connection string it cannot parse whole, password and all.
        self.message = PostgresConfiguration.redactingPasswords(in: message)
        self.detail = detail
        self.hint = hint
        self.schema = schema
        self.table = table
        self.column = column
        self.constraint = constraint
    }

    /// The connection broke, or the server ended the session (shut down or crashed): whatever was sent last may
    /// or may not have been done.
    var endsSession: Bool {
        kind == .connection || sqlState == .adminShutdown || sqlState == .crashShutdown
    }

    /// A serialization failure or deadlock: the whole transaction may succeed if run again.
    public var isTransactionRetryable: Bool {
        sqlState == .serializationFailure || sqlState == .deadlockDetected
    }

    public var description: String {
        switch kind {
        case .server:
            var text = "PostgreSQL error \(sqlState?.description ?? "(no SQLSTATE)")"
            if let constraint { text += " on constraint \"\(constraint)\"" }
            if messageIsSafeToShow { text += ": \(message)" }
            return text
        case .connection: return "PostgreSQL connection error: \(message)"
        case .decoding: return "PostgreSQL decoding error: \(message)"
        case .poolTimeout: return "PostgreSQL pool timeout: \(message)"
        case .closed: return "PostgreSQL connection closed: \(message)"
        case .invalidQuery: return "invalid PostgreSQL query: \(message)"
        }
    }

    public var debugDescription: String {
        var parts = [description]
        if kind == .server && !messageIsSafeToShow { parts.append("message: \(message)") }
        if let detail { parts.append("detail: \(detail)") }
        if let hint { parts.append("hint: \(hint)") }
        if let table { parts.append("table: \(table)") }
        if let column { parts.append("column: \(column)") }
        return parts.joined(separator: "; ")
    }

    /// Data exceptions (class 22) quote the offending input; integrity errors (23) and errors raised by
    /// functions (P0 and custom codes) may format row data into the message. Other classes describe the
    /// statement or the session.
    private var messageIsSafeToShow: Bool {
        guard let errorClass = sqlState?.errorClass else { return false }
        let dataBearing: Set<Substring> = ["22", "23", "P0"]
        let standardClasses = "0123456789"
        return !dataBearing.contains(errorClass) && standardClasses.contains(errorClass.first!)
    }
}
