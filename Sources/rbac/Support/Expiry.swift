import ArgumentParser
import Collaboration
import Foundation

/// A span of time as people write it: 30m, 12h, 7d.
struct Lifetime: ExpressibleByArgument {
    let duration: Duration
    let defaultValueDescription: String

    init?(argument: String) {
        guard let match = argument.wholeMatch(of: /(\d{1,6})([mhd])/), let count = Int(match.1) else { return nil }
        let unit: Int =
            switch match.2 {
            case "m": 60
            case "h": 3600
            default: 86_400
            }
        duration = .seconds(count * unit)
        defaultValueDescription = argument
    }
}

/// An instant given on the command line (see `instant(parsing:)`), read by `date(_:)` when the command checks its
/// options: a refusal there can say what an instant looks like, where ArgumentParser's says only that the value is
/// invalid (`2027-09-30T18:00` lacks its zone).
struct Instant: ExpressibleByArgument {
    let text: String

    init?(argument: String) { text = argument }

    /// The instant, or a usage error naming `option`.
    func date(_ option: String) throws -> Date {
        guard let date = instant(parsing: text) else {
            throw ValidationError(instantRefusal(text, option))
        }
        return date
    }
}

/// When a membership ends: after a lifetime from now (`--expires 90d`) or at an instant (`--until ...`), never
/// both; nil for neither (it holds until changed). `flags` names the two options in the error.
func membershipExpiry(after lifetime: Lifetime?, until instant: Instant?, flags: (String, String)) throws -> Date? {
    if lifetime != nil && instant != nil {
        throw ValidationError("give \(flags.0) or \(flags.1), not both")
    }
    if let lifetime {
        // Zero would end the membership as it begins; the database would refuse it, naming an instant to the
        // microsecond that nobody typed.
        guard lifetime.duration > .zero else {
            throw ValidationError("\(flags.0) must be at least 1m, not \(lifetime.defaultValueDescription)")
        }
        return Date().addingTimeInterval(TimeInterval(lifetime.duration.components.seconds))
    }
    return try instant?.date(flags.1)
}
