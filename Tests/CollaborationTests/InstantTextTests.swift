import Collaboration
import Foundation
import Testing

@Suite("Instants as text")
struct InstantTextTests {
    @Test("ISO 8601 with a zone, or a date alone, is read as that instant")
    func reads() {
        let cases: [(String, TimeInterval)] = [
            ("2030-01-01", 1_893_456_000), ("2030-01-01T00:00Z", 1_893_456_000),
            ("2030-01-01T00:00:00.123Z", 1_893_456_000), ("2030-01-01T01:30:00+01:30", 1_893_456_000),
            ("2028-02-29T23:59:59-00:00", 1_835_481_599), ("1969-12-31T23:59:59Z", -1),
            // PostgreSQL's calendar is Gregorian back to year 1, where Foundation's turns Julian before 1582-10-15.
            ("1582-10-04T00:00Z", -12_220_243_200), ("0001-01-01", -62_135_596_800),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
        ]
        for (text, seconds) in cases {
            #expect(instant(parsing: text)?.timeIntervalSince1970 == seconds, "\(text)")
        }
    }

    @Test("a date or time that does not exist is refused, not rolled over into the next")
    func refusesWhatDoesNotExist() {
        for text in [
            "2030-02-30T00:00:00Z", "2030-02-29", "2030-04-31T12:00Z", "2030-13-01T00:00Z", "2030-00-10",
            "2030-01-01T24:00:00Z", "2030-01-01T23:60Z", "2030-01-01T23:59:60Z", "2030-01-01T12:00+24:00",
            "2030-01-01T12:00+01:60", "2030-01-01T00:00:00", "2030-01-01 00:00Z", "tomorrow", "0000-01-01",
            "0000-12-31T12:00Z",
        ] {
            #expect(instant(parsing: text) == nil, "\(text)")
        }
    }

    @Test("a day is one of PostgreSQL's calendar: from 0001-01-01 to 9999-12-31, never year 0000")
    func calendarDays() {
        #expect(CalendarDay("0001-01-01")?.description == "0001-01-01")
        #expect(CalendarDay("9999-12-31")?.description == "9999-12-31")
        #expect(CalendarDay("2024-02-29") != nil)
        for text in ["0000-01-01", "0000-02-29", "2026-02-29", "1900-02-29", "10000-01-01", "2026-1-01", "+026-01-01"] {
            #expect(CalendarDay(text) == nil, "\(text)")
        }
    }

    @Test(
        "a day refused says what it misses: the form, or the part of the calendar a date of that form names wrong",
        arguments: [
            ("2026-02-29", "\"2026-02-29\" is not a date: 2026-02 has days 01 to 28"),
            ("2028-02-30", "\"2028-02-30\" is not a date: 2028-02 has days 01 to 29"),
            ("2027-04-00", "\"2027-04-00\" is not a date: 2027-04 has days 01 to 30"),
            ("2027-13-01", "\"2027-13-01\" is not a date: a month is 01 to 12"),
            ("0000-01-01", "\"0000-01-01\" is not a date: the calendar has no year 0000 (0001 follows 1 BC)"),
            ("01/05/2027", "\"01/05/2027\" is not a date (YYYY-MM-DD)"),
            ("2027-5-1", "\"2027-5-1\" is not a date (YYYY-MM-DD)"),
            ("٢٠٢٧-٠١-٠١", "\"٢٠٢٧-٠١-٠١\" is not a date (YYYY-MM-DD)"),
        ])
    func dayRefusals(text: String, refusal: String) {
        #expect(CalendarDay(text) == nil)
        #expect(CalendarDay.refusal(text) == refusal)
    }

    @Test("an instant refused for its date says so in the same words; one of another form, nothing more")
    func missingDays() {
        #expect(missingDay(in: "2027-02-30T10:00Z") == "\"2027-02-30\" is not a date: 2027-02 has days 01 to 28")
        #expect(missingDay(in: "2027-13-01") == "\"2027-13-01\" is not a date: a month is 01 to 12")
        for text in ["2027-02-28T24:00Z", "2027-02-28T10:00", "tomorrow", "2027-2-30", "2027-02-28"] {
            #expect(missingDay(in: text) == nil, "\(text)")
        }
    }

    @Test("a day's distance from 1970 agrees with Foundation's calendar wherever that one is Gregorian")
    func daysSince1970() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        for year in 1583...2500 {
            for month in 1...12 {
                for day in [1, 28] {
                    let text = String(format: "%04d-%02d-%02d", year, month, day)
                    let date = try #require(calendar.date(from: DateComponents(year: year, month: month, day: day)))
                    #expect(CalendarDay(text)?.daysSince1970 == Int(date.timeIntervalSince1970) / 86_400, "\(text)")
                }
            }
        }
    }
}
