import Collaboration
import Foundation

/// Prints `value` as the HTTP API writes it (same keys, dates and ids), indented.
func printJSON(_ value: some Encodable) throws {
    let text = String(decoding: try JSONEncoder.rbac(pretty: true).encode(value), as: UTF8.self)
    // Foundation spreads an empty array or object over three lines. A bracket and a line break can only be
    // JSON's own, since a string holds its line breaks escaped.
    print(text.replacing(#/([\[{])\n\s*\n\s*([\]}])/#) { "\($0.1)\($0.2)" })
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

    var rendered: String {
        let widths = headers.indices.map { column in
            ([headers[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        return ([line(headers)] + rows.map(line)).joined(separator: "\n")
    }
}
