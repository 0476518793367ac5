import CLibPQ

/// Owns one `PGresult`.
@usableFromInline
final class PostgresResult: @unchecked Sendable {
    // Safety: a PGresult is never modified after libpq returns it, and libpq allows reading it from any thread.
    @usableFromInline let pointer: OpaquePointer
    /// Read once, so that finding a column by name is a comparison of short Swift strings rather than a C
    /// string conversion and `PQfnumber` for every value.
    @usableFromInline let columnNames: [String]

    init(pointer: OpaquePointer) {
        self.pointer = pointer
        self.columnNames = (0..<PQnfields(pointer)).map { String(cString: PQfname(pointer, $0)) }
    }

    deinit { PQclear(pointer) }
}

/// The rows a statement returned.
public struct PostgresRows: Sendable, RandomAccessCollection {
    let result: PostgresResult

    public let startIndex = 0
    public let endIndex: Int

    init(result: PostgresResult) {
        self.result = result
        self.endIndex = Int(PQntuples(result.pointer))
    }

    public subscript(position: Int) -> PostgresRow {
        precondition(indices.contains(position), "row \(position) out of range 0..<\(count)")
        return PostgresRow(result: result, row: Int32(position))
    }

    /// Rows inserted, updated, deleted or selected, as the command tag reports them.
    public var affectedRows: Int {
        Int(String(cString: PQcmdTuples(result.pointer))) ?? 0
    }

    public var columnNames: [String] {
        result.columnNames
    }
}

/// One row of a result.
public struct PostgresRow: Sendable {
    @usableFromInline let result: PostgresResult
    @usableFromInline let row: Int32

    /// The value of the column named `column`, as `T`. NULL decodes only into an `Optional`.
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let index = result.columnNames.firstIndex(of: column) else {
            throw PostgresError(.decoding, message: "the result has no column named \"\(column)\"", column: column)
        }
        return try decode(Int32(index), name: column, as: type)
    }

    /// The value of the column at `index` (0-based), as `T`.
    @inlinable
    public func decode<T: PostgresDecodable>(column index: Int, as type: T.Type = T.self) throws -> T {
        guard result.columnNames.indices.contains(index) else {
            throw PostgresError(.decoding, message: "the result has no column \(index)")
        }
        return try decode(Int32(index), name: result.columnNames[index], as: type)
    }

    @inlinable
    func decode<T: PostgresDecodable>(_ index: Int32, name: String, as type: T.Type) throws -> T {
        let cell = PostgresCell(column: name, type: PostgresDataType(rawValue: PQftype(result.pointer, index)))
        if PQgetisnull(result.pointer, row, index) == 1 {
            return try T.decodeNull(cell: cell)
        }
        let bytes = UnsafeRawBufferPointer(
            start: PQgetvalue(result.pointer, row, index), count: Int(PQgetlength(result.pointer, row, index)))
        return try T.decode(from: PostgresBytes(bytes), cell: cell)
    }
}

extension PostgresBindings {
    /// Lays the parameters out for `PQsendQueryParams` / `PQsendQueryPrepared`: one buffer holds every value,
    /// each followed by a NUL byte (libpq reads text-format values up to a NUL and ignores their lengths), so
    /// an empty value still gets a non-NULL pointer (a NULL pointer means SQL NULL to libpq).
    func withParameterPointers<T>(
        _ body: (
            Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
            UnsafePointer<Int32>?
        ) -> T
    ) -> T {
        var storage: [UInt8] = []
        var offsets: [Int?] = []
        var lengths: [Int32] = []
        for value in values {
            if let value {
                offsets.append(storage.count)
                storage.append(contentsOf: value)
                storage.append(0)
                lengths.append(Int32(value.count))
            } else {
                offsets.append(nil)
                lengths.append(0)
            }
        }
        if storage.isEmpty { storage.append(0) }  // so that baseAddress is never nil
        let oids = types.map(\.rawValue)
        return storage.withUnsafeBufferPointer { storage in
            let base = UnsafeRawPointer(storage.baseAddress!).assumingMemoryBound(to: CChar.self)
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0.map { base + $0 } }
            return pointers.withUnsafeBufferPointer { pointers in
                oids.withUnsafeBufferPointer { oids in
                    lengths.withUnsafeBufferPointer { lengths in
                        formats.withUnsafeBufferPointer { formats in
                            body(
                                Int32(values.count), oids.baseAddress, pointers.baseAddress, lengths.baseAddress,
                                formats.baseAddress)
                        }
                    }
                }
            }
        }
    }
}
