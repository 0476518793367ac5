import Budget
import Foundation
import NIOCore

/// A budget overview's JSON, byte for byte as `PermissionAPIController.json` writes it (OverviewJSONTests
/// compare the two), written directly: JSONEncoder took about 100 ms for an overview with 20,000 expense
/// links, several times what reading and adding up the overview costs.
struct OverviewJSON {
    private var buffer = ByteBuffer()

    static func body(_ overview: BudgetOverview) -> ByteBuffer {
        var json = OverviewJSON()
        let links = overview.items.reduce(0) { $0 + $1.expenses.count + $1.giftLinks.count }
        json.buffer.reserveCapacity(400 * overview.items.count + 120 * links + 200)
        json.write(overview)
        return json.buffer
    }

    // Keys in sorted order, as the encoder's `.sortedKeys` writes them; an absent folder is left out, as
    // `encodeIfPresent` leaves it.

    private mutating func write(_ overview: BudgetOverview) {
        raw(#"{"items":["#)
        list(overview.items) { $0.write($1) }
        raw(#"],"revision":\#(overview.revision),"scenario_id":"#)
        uuid(overview.scenarioID)
        raw(#","totals":{"budgeted":"#)
        decimal(overview.totals.budgeted)
        raw(#","effective_spent":"#)
        decimal(overview.totals.effectiveSpent)
        raw(#","gifts":"#)
        decimal(overview.totals.gifts)
        raw(#","spent":"#)
        decimal(overview.totals.spent)
        raw("}}")
    }

    private mutating func write(_ line: BudgetOverview.Line) {
        raw(#"{"effective_spent":"#)
        decimal(line.effectiveSpent)
        raw(#","expenses":["#)
        list(line.expenses) { $0.write($1) }
        raw(#"],"gift_links":["#)
        list(line.giftLinks) { $0.write($1) }
        raw(#"],"gifts":"#)
        decimal(line.gifts)
        raw(#","item":"#)
        write(line.item)
        raw(#","remaining":"#)
        decimal(line.remaining)
        raw(#","spent":"#)
        decimal(line.spent)
        raw("}")
    }

    private mutating func write(_ item: BudgetItem) {
        raw(#"{"budgeted":"#)
        decimal(item.budgeted)
        raw(#","category":"#)
        string(item.category)
        raw(#","event":"#)
        string(item.event)
        if let folder = item.folderID {
            raw(#","folder_id":"#)
            uuid(folder)
        }
        raw(#","id":"#)
        uuid(item.id)
        raw(#","name":"#)
        string(item.name)
        raw(#","scenario_id":"#)
        uuid(item.scenarioID)
        raw("}")
    }

    private mutating func write(_ link: BudgetOverview.ExpenseLink) {
        raw(#"{"allocated":"#)
        decimal(link.allocated)
        raw(#","expense_id":"#)
        uuid(link.expenseID)
        raw(#","name":"#)
        string(link.name)
        raw("}")
    }

    private mutating func write(_ link: BudgetOverview.GiftLink) {
        raw(#"{"amount":"#)
        decimal(link.amount)
        raw(#","from":"#)
        string(link.from)
        raw(#","gift_id":"#)
        uuid(link.giftID)
        raw(link.received ? #","received":true}"# : #","received":false}"#)
    }

    private mutating func list<Element>(_ elements: [Element], _ write: (inout OverviewJSON, Element) -> Void) {
        for (index, element) in elements.enumerated() {
            if index > 0 { raw(",") }
            write(&self, element)
        }
    }

    private mutating func raw(_ text: String) {
        buffer.writeString(text)
    }

    /// As JSONEncoder writes a Decimal, its description: a plain decimal number with no trailing zeros ("12",
    /// "12.5", "-0.05"). Whole cents, as every amount is, are written from the integer, without the description's
    /// long division.
    private mutating func decimal(_ value: Decimal) {
        guard let cents = Money.wholeCents(value) else { return raw(value.description) }
        let (units, fraction) = cents.magnitude.quotientAndRemainder(dividingBy: 100)
        if cents < 0 { buffer.writeInteger(UInt8(ascii: "-")) }
        raw(String(units))
        guard fraction != 0 else { return }
        buffer.writeInteger(UInt8(ascii: "."))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction / 10))
        if fraction % 10 != 0 { buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction % 10)) }
    }

    /// Lower case, as UUIDText.swift has every id written.
    private mutating func uuid(_ value: UUID) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 38) { output in
            withUnsafeBytes(of: value.uuid) { bytes in
                output[0] = UInt8(ascii: "\"")
                var position = 1
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        output[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    output[position] = Self.hexDigits[Int(bytes[index] >> 4)]
                    output[position + 1] = Self.hexDigits[Int(bytes[index] & 0x0F)]
                    position += 2
                }
                output[position] = UInt8(ascii: "\"")
            }
            return 38
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Escaped as JSONEncoder escapes: the quote, the backslash and the control characters (as \b, \t, \n, \f,
    /// \r or \u00xx); everything else, slashes and non-ASCII text included, as it is.
    private mutating func string(_ value: String) {
        buffer.writeInteger(UInt8(ascii: "\""))
        var pending = value.utf8.startIndex
        for index in value.utf8.indices {
            let byte = value.utf8[index]
            let escape: String
            switch byte {
            case UInt8(ascii: "\""): escape = #"\""#
            case UInt8(ascii: "\\"): escape = #"\\"#
            case 0x08: escape = #"\b"#
            case 0x09: escape = #"\t"#
            case 0x0A: escape = #"\n"#
            case 0x0C: escape = #"\f"#
            case 0x0D: escape = #"\r"#
            case 0x00..<0x20: escape = #"\u00"# + (byte < 0x10 ? "0" : "1") + String(byte & 0x0F, radix: 16)
            default: continue
            }
            buffer.writeBytes(value.utf8[pending..<index])
            buffer.writeString(escape)
            pending = value.utf8.index(after: index)
        }
        buffer.writeBytes(value.utf8[pending...])
        buffer.writeInteger(UInt8(ascii: "\""))
    }
}
