import Budget
import Foundation
import NIOCore

/// A budget overview's JSON, byte for byte as `PermissionAPIController.json` writes it (OverviewJSONTests
/// compare the two), written directly: JSONEncoder took about 100 ms for an overview with 20,000 expense
/// links, several times what reading and adding up the overview costs.
struct OverviewJSON {
    private var buffer = ByteBuffer()
    /// Whether the object being written has a member yet: the next one's key then follows a comma.
    private var hasMembers = false

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
        open("{")
        key("items")
        list(overview.items) { $0.write($1) }
        key("revision")
        raw(String(overview.revision))
        key("scenario_id")
        uuid(overview.scenarioID)
        key("totals")
        open("{")
        key("budgeted")
        decimal(overview.totals.budgeted)
        key("effective_spent")
        decimal(overview.totals.effectiveSpent)
        key("gifts")
        decimal(overview.totals.gifts)
        key("spent")
        decimal(overview.totals.spent)
        close("}")
        close("}")
    }

    private mutating func write(_ line: BudgetOverview.Line) {
        open("{")
        key("effective_spent")
        decimal(line.effectiveSpent)
        key("expenses")
        list(line.expenses) { $0.write($1) }
        key("gift_links")
        list(line.giftLinks) { $0.write($1) }
        key("gifts")
        decimal(line.gifts)
        key("item")
        write(line.item)
        key("remaining")
        decimal(line.remaining)
        key("spent")
        decimal(line.spent)
        close("}")
    }

    private mutating func write(_ item: BudgetItem) {
        open("{")
        key("budgeted")
        decimal(item.budgeted)
        key("category")
        string(item.category)
        key("event")
        string(item.event)
        if let folder = item.folderID {
            key("folder_id")
            uuid(folder)
        }
        key("id")
        uuid(item.id)
        key("name")
        string(item.name)
        key("scenario_id")
        uuid(item.scenarioID)
        close("}")
    }

    private mutating func write(_ link: BudgetOverview.ExpenseLink) {
        open("{")
        key("allocated")
        decimal(link.allocated)
        key("expense_id")
        uuid(link.expenseID)
        key("name")
        string(link.name)
        close("}")
    }

    private mutating func write(_ link: BudgetOverview.GiftLink) {
        open("{")
        key("amount")
        decimal(link.amount)
        key("from")
        string(link.from)
        key("gift_id")
        uuid(link.giftID)
        key("received")
        raw(link.received ? "true" : "false")
        close("}")
    }

    private mutating func list<Element>(_ elements: [Element], _ write: (inout OverviewJSON, Element) -> Void) {
        open("[")
        for (index, element) in elements.enumerated() {
            if index > 0 { buffer.writeInteger(UInt8(ascii: ",")) }
            write(&self, element)
        }
        close("]")
    }

    /// Starts an object's member, after a comma unless it is the object's first.
    private mutating func key(_ name: StaticString) {
        if hasMembers { buffer.writeInteger(UInt8(ascii: ",")) }
        buffer.writeInteger(UInt8(ascii: "\""))
        buffer.writeStaticString(name)
        buffer.writeStaticString("\":")
        hasMembers = true
    }

    private mutating func open(_ bracket: StaticString) {
        buffer.writeStaticString(bracket)
        hasMembers = false
    }

    /// What is closed was a member's value (the object around it now has a member) or an element of a list
    /// (which writes its own commas).
    private mutating func close(_ bracket: StaticString) {
        buffer.writeStaticString(bracket)
        hasMembers = true
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
