/// A PostgreSQL type, by its OID.
public struct PostgresDataType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let bool = PostgresDataType(rawValue: 16)
    public static let bytea = PostgresDataType(rawValue: 17)
    public static let name = PostgresDataType(rawValue: 19)
    public static let int8 = PostgresDataType(rawValue: 20)
    public static let int2 = PostgresDataType(rawValue: 21)
    public static let int4 = PostgresDataType(rawValue: 23)
    public static let text = PostgresDataType(rawValue: 25)
    public static let oid = PostgresDataType(rawValue: 26)
    public static let json = PostgresDataType(rawValue: 114)
    public static let float8 = PostgresDataType(rawValue: 701)
    public static let bpchar = PostgresDataType(rawValue: 1042)
    public static let varchar = PostgresDataType(rawValue: 1043)
    public static let date = PostgresDataType(rawValue: 1082)
    public static let timestamp = PostgresDataType(rawValue: 1114)
    public static let timestamptz = PostgresDataType(rawValue: 1184)
    public static let numeric = PostgresDataType(rawValue: 1700)
    public static let uuid = PostgresDataType(rawValue: 2950)
    public static let jsonb = PostgresDataType(rawValue: 3802)
    public static let textArray = PostgresDataType(rawValue: 1009)
    public static let varcharArray = PostgresDataType(rawValue: 1015)
    public static let uuidArray = PostgresDataType(rawValue: 2951)
    public static let int8Array = PostgresDataType(rawValue: 1016)
    public static let byteaArray = PostgresDataType(rawValue: 1001)

    public var description: String {
        Self.names[rawValue] ?? "oid \(rawValue)"
    }

    private static let names: [UInt32: String] = [
        16: "bool", 17: "bytea", 19: "name", 20: "int8", 21: "int2", 23: "int4", 25: "text", 26: "oid",
        114: "json", 701: "float8", 1042: "bpchar", 1043: "varchar", 1082: "date", 1114: "timestamp",
        1184: "timestamptz", 1700: "numeric", 2950: "uuid", 3802: "jsonb", 1009: "text[]", 1015: "varchar[]",
        2951: "uuid[]", 1016: "int8[]", 1001: "bytea[]",
    ]
}

/// How a value travels on the wire.
public enum PostgresFormat: Int32, Sendable {
    case text = 0
    case binary = 1
}
