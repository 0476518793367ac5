import Foundation

/// A SQL statement and its bind parameters.
///
/// Build queries by string interpolation: every interpolated value becomes a `$n` parameter, so values never
/// become SQL text.
///
/// ```swift
/// let query: PostgresQuery = "SELECT name FROM couples WHERE id = \(coupleID)"
/// ```
///
/// SQL text that is not a literal in the source needs the loud `init(unsafeSQL:)`.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public private(set) var sql: String
    public private(set) var bindings: PostgresBindings
    /// When set, the statement is prepared once per connection under this name and executed by name.
    public private(set) var statementName: String?

    /// Raw SQL with no interpolation. Never pass text that contains values from outside the program.
    public init(unsafeSQL sql: String, bindings: PostgresBindings = PostgresBindings()) {
        self.sql = sql
        self.bindings = bindings
    }

    public init(stringLiteral value: String) {
        self.init(unsafeSQL: value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(unsafeSQL: stringInterpolation.sql, bindings: stringInterpolation.bindings)
    }

    /// This query as a named prepared statement: prepared on first use on each connection (again after a
    /// reconnect), then executed by name. Use it for hot statements; the name must always denote the same SQL.
    public func prepared(as name: String) -> PostgresQuery {
        var copy = self
        copy.statementName = name
        return copy
    }

    /// The SQL and the parameters' types, never their values.
    public var description: String {
        let types = bindings.types.map(\.description).joined(separator: ", ")
        return "\(sql) [\(types)]"
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var bindings = PostgresBindings()

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
        }

        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// A bind parameter.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value) {
            bindings.append(value)
            sql += "$\(bindings.count)"
        }

        /// A bind parameter that is SQL NULL when `value` is nil.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            bindings.append(value)
            sql += "$\(bindings.count)"
        }

        /// SQL text fixed when the program was compiled (a column list shared by several statements), spliced in
        /// as it is: a `StaticString` cannot carry input.
        public mutating func appendInterpolation(sql fragment: StaticString) {
            sql += fragment.description
        }

        /// A string constant, for the few statements that take no parameters there, such as `SET LOCAL`.
        /// Written as an escape string (`E'...'`, backslashes and quotes doubled), which reads the same whatever
        /// `standard_conforming_strings` says. The text must hold no NUL, which no PostgreSQL text can.
        public mutating func appendInterpolation(literal: String) {
            precondition(!literal.contains("\u{0}"), "a PostgreSQL string cannot hold NUL")
            sql +=
                "E'"
                + literal.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "'", with: "''") + "'"
        }

        /// A quoted identifier (a table, column or channel name), for the few statements that take no
        /// parameters there, such as `LISTEN`. Embedded quotes are doubled.
        public mutating func appendInterpolation(identifier: String) {
            sql += "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        }
    }
}

/// The parameters of a query: each one's type, wire format and encoded bytes (nil for NULL).
public struct PostgresBindings: Sendable {
    public private(set) var types: [PostgresDataType] = []
    var formats: [Int32] = []
    var values: [[UInt8]?] = []

    public init() {}

    public var count: Int { values.count }

    public mutating func append<Value: PostgresEncodable>(_ value: Value) {
        var bytes: [UInt8] = []
        value.encode(into: &bytes)
        types.append(Value.postgresType)
        formats.append(Value.postgresFormat.rawValue)
        values.append(bytes)
    }

    public mutating func append<Value: PostgresEncodable>(_ value: Value?) {
        guard let value else {
            types.append(Value.postgresType)
            formats.append(Value.postgresFormat.rawValue)
            values.append(nil)
            return
        }
        append(value)
    }
}
