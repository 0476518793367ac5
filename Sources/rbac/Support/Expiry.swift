import ArgumentParser
import Collaboration
import Foundation

/// An instant given on the command line (see `instant(parsing:)`).
struct Instant: ExpressibleByArgument {
    let date: Date

    init?(argument: String) {
        guard let date = instant(parsing: argument) else { return nil }
        self.date = date
    }
}

/// When a membership ends: after a lifetime from now (`--expires 90d`) or at an instant (`--until ...`), never
/// both; nil for neither (it holds until changed). `flags` names the two options in the error.
func membershipExpiry(after lifetime: Lifetime?, until instant: Instant?, flags: (String, String)) throws -> Date? {
    if lifetime != nil && instant != nil {
        throw ValidationError("give \(flags.0) or \(flags.1), not both")
    }
    if let lifetime { return Date().addingTimeInterval(TimeInterval(lifetime.duration.components.seconds)) }
    return instant?.date
}
