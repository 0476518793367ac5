import Foundation

/// A date without a time of day, as `YYYY-MM-DD` (due dates, payment dates; the date of an
/// instant, `instant(parsing:)`).
public struct CalendarDay: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    /// Parses `YYYY-MM-DD`, refusing dates that do not exist (2026-02-30), and year 0000, which PostgreSQL's
    /// calendar does not have (1 BC comes before 0001).
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy(\.isDigits),
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            year >= 1, (1...12).contains(month), (1...Self.days(inMonth: month, year: year)).contains(day)
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Why `text` is no day, for a refusal that quotes it: its shape, else the part of the calendar it misses
    /// (`"2027-02-30" is not a date: 2027-02 has days 01 to 28`), so that a date typed right but for its day is not
    /// taken for one written wrong.
    public static func refusal(_ text: String) -> String {
        let notADate = "\(quoted(text)) is not a date"
        guard let parts = text.wholeMatch(of: /([0-9]{4})-([0-9]{2})-([0-9]{2})/), let year = Int(parts.1),
            let month = Int(parts.2)
        else { return "\(notADate) (YYYY-MM-DD)" }
        if year == 0 { return "\(notADate): the calendar has no year 0000 (0001 follows 1 BC)" }
        guard (1...12).contains(month) else { return "\(notADate): a month is 01 to 12" }
        return "\(notADate): \(parts.1)-\(parts.2) has days 01 to \(days(inMonth: month, year: year))"
    }

    /// Today in UTC.
    public static func today(_ now: Date = Date()) -> CalendarDay {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: now)
        return CalendarDay(String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!))!
    }

    public var description: String { String(format: "%04d-%02d-%02d", year, month, day) }

    public static func < (a: CalendarDay, b: CalendarDay) -> Bool {
        (a.year, a.month, a.day) < (b.year, b.month, b.day)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let day = CalendarDay(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: Self.refusal(text)))
        }
        self = day
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Its distance in days from 1970-01-01 in the proleptic Gregorian calendar, PostgreSQL's. Foundation's
    /// Gregorian calendar turns Julian before 15 October 1582, which puts 0001-01-01 two days from where the
    /// database has it. Counted from 1 March, so that a leap day ends its year.
    public var daysSince1970: Int {
        let marchYear = month > 2 ? year : year - 1
        let yearOfEra = marchYear % 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return marchYear / 400 * 146_097 + dayOfEra - 719_468
    }

    private static func days(inMonth month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
