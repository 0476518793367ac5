import Foundation
import Testing

@testable import Server

@Suite("Failed invitation-token attempts")
struct FailedAttemptLimiterTests {
    @Test("a client has `limit` failures a window; an IPv6 /64 is one client, as an IPv4 address is")
    func perClient() async {
        let clock = TestClock()
        let limiter = FailedAttemptLimiter(limit: 2, window: 60, now: { clock.now })
        for address in ["2001:db8:0:1::1", "2001:db8:0:1:ffff::9", "::ffff:192.0.2.7", "192.0.2.7"] {
            let other = address.contains(".") ? "192.0.2.8" : "2001:db8:0:2::1"
            #expect(await limiter.countFailure(address), "\(address)")
            #expect(!(await limiter.isBlocked(other)), "\(other) is another client")
        }
        for blocked in ["2001:db8:0:1::abcd", "192.0.2.7"] {
            #expect(await limiter.isBlocked(blocked))
            #expect(!(await limiter.countFailure(blocked)), "\(blocked): refused, not counted")
        }
        #expect(await limiter.countFailure("2001:db8:0:2::1"))
        #expect(await limiter.countFailure("192.0.2.8"))
        clock.now += 61
        #expect(await limiter.countFailure("2001:db8:0:1::1"), "a window later it may fail again")
    }

    @Test("the table holds `capacity` clients: stale ones are forgotten, and newcomers wait while it is full")
    func bounded() async {
        let clock = TestClock()
        let limiter = FailedAttemptLimiter(limit: 3, window: 60, capacity: 100, now: { clock.now })
        // A new address every second: at most 60 within any window, and the table never needs more.
        for n in 0..<1_000 {
            #expect(await limiter.countFailure("198.51.\(n / 256).\(n % 256)"), "\(n)")
            #expect(await limiter.clients <= 100)
            clock.now += 1
        }
        // 100 clients in one second fill it: the next is refused until a window has passed.
        clock.now += 61
        for n in 0..<100 { #expect(await limiter.countFailure("203.0.113.\(n)")) }
        #expect(await limiter.clients == 100)
        #expect(await limiter.isBlocked("192.0.2.1"))
        #expect(!(await limiter.countFailure("192.0.2.1")))
        clock.now += 30
        #expect(!(await limiter.countFailure("192.0.2.1")), "their failures are still within the window")
        #expect(await limiter.countFailure("203.0.113.5"), "those in the table go on being counted")
        clock.now += 31
        #expect(await limiter.countFailure("192.0.2.1"))
        #expect(await limiter.clients == 2, "203.0.113.5's second failure is 30 s younger than the rest")
    }
}
