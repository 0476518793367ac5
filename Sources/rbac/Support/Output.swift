import Collaboration
import Foundation

/// Writes `line` and a line break to standard error in one write. A line that cannot be written is dropped:
/// `FileHandle.write(_: Data)` traps on a closed pipe wherever SIGPIPE is ignored (NIO ignores it, so in
/// `serve`), and a command must not crash for want of somewhere to say what it did.
func printError(_ line: String) {
    try? FileHandle.standardError.write(contentsOf: Data((line + "\n").utf8))
}

/// Says on standard error what a command's output leaves out: `rbac: TEXT` for people, or with --json one line of
/// JSON, `{FIELD: VALUE}`, so that a script reads it without reading prose, as it reads a failure. Listings say
/// where their next page starts (`{"next_after":"PLACE"}`, as the HTTP API names it).
func printNote(json: Bool, _ text: String, _ field: String, _ value: some Encodable) {
    if json, let line = try? JSONEncoder.rbac().encode([field: value]) {
        printError(String(decoding: line, as: UTF8.self))
    } else {
        printError("rbac: \(text)")
    }
}

/// An id as the CLI prints it, in lower case as the HTTP API writes it; empty for none.
func idText(_ id: UUID?) -> String { id?.uuidString.lowercased() ?? "" }

/// Prints `value` as the HTTP API writes it (same keys, dates and ids), indented.
func printJSON(_ value: some Encodable) throws {
    print(try jsonText(value))
}

/// `value` as `printJSON` prints it.
func jsonText(_ value: some Encodable) throws -> String {
    let text = String(decoding: try JSONEncoder.rbac(pretty: true).encode(value), as: UTF8.self)
    // Foundation spreads an empty array or object over three lines. A bracket and a line break can only be
    // JSON's own, since a string holds its line breaks escaped.
    return text.replacing(#/([\[{])\n\s*\n\s*([\]}])/#) { "\($0.1)\($0.2)" }
}

/// What a command that lists records or writes one prints: with --json, the record it wrote (an object, as the
/// HTTP API answers a write) or the records it listed (an array); as text, a table either way.
enum Listing<Row: Encodable>: Encodable {
    case written(Row)
    case listed([Row])

    var rows: [Row] {
        switch self {
        case .written(let row): [row]
        case .listed(let rows): rows
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .written(let row): try row.encode(to: encoder)
        case .listed(let rows): try rows.encode(to: encoder)
        }
    }
}

/// A plain-text table with left-aligned columns, for people. Control characters in a cell are shown escaped: a
/// value written by raw SQL can neither rewrite the terminal nor pass for another row.
struct Table {
    let headers: [String]
    let rows: [[String]]

    init(headers: [String], rows: [[String]]) {
        self.headers = headers
        self.rows = rows.map { $0.map(visible) }
    }

    var rendered: String { lines(widths: widths, header: true).joined(separator: "\n") }

    /// Each column's width: that of its widest cell, the header's included.
    var widths: [Int] {
        headers.indices.map { column in ([headers[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0 }
    }

    /// The rows, after the header when `header`, their columns `widths` wide (a wider cell takes the room it
    /// needs).
    func lines(widths: [Int], header: Bool) -> [String] {
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padding(toLength: max($1, $0.count), withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        return ((header ? [headers] : []) + rows).map(line)
    }
}

/// The columns a table of `Row`s shows: their headers, and each row's cells.
struct Columns<Row>: Sendable {
    let headers: [String]
    let cells: @Sendable (Row) -> [String]

    func table(_ rows: [Row]) -> Table { Table(headers: headers, rows: rows.map(cells)) }
}

/// A listing printed a page at a time, as it is read, so that a long one shows from its first page and is never
/// held whole: with --json one array, as `printJSON` prints it; as text one table, its columns as wide as the
/// first page needs.
struct ListingPrinter<Row: Encodable> {
    let json: Bool
    let columns: Columns<Row>
    private var widths: [Int]?
    private var printed = 0

    init(json: Bool, columns: Columns<Row>) {
        (self.json, self.columns) = (json, columns)
    }

    mutating func print(_ rows: [Row]) throws {
        if json {
            for row in rows {
                let element = try jsonText(row).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
                Swift.print(printed == 0 ? "[\n" + element : ",\n" + element, terminator: "")
                printed += 1
            }
        } else {
            let table = columns.table(rows)
            let widths = self.widths ?? table.widths
            for line in table.lines(widths: widths, header: self.widths == nil) { Swift.print(line) }
            self.widths = widths
        }
    }

    /// Ends the listing: the array's bracket, or a table's header when there was no row.
    mutating func finish() throws {
        if json {
            Swift.print(printed == 0 ? "[]" : "\n]")
        } else if widths == nil {
            try print([])
        }
    }
}
