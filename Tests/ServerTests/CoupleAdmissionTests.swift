import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Server

@Suite("How many requests of one couple are answered at once")
struct CoupleAdmissionTests {
    /// Waits until `count` of the couple's requests wait for a place; fails after 10 s instead of hanging.
    static func waiting(_ admission: CoupleAdmission, _ couple: UUID, count: Int) async throws {
        let lined = try await eventually(within: .seconds(10), every: .milliseconds(1)) {
            admission.waiting(couple) >= count
        }
        try #require(lined, "\(admission.waiting(couple)) waiting, not \(count)")
    }

    @Test("a couple's places are its own; the rest wait, each taking a place given back in the order they came")
    func inTurn() async throws {
        let admission = CoupleAdmission(limit: 2, wait: .seconds(60))
        let (couple, other) = (UUID(), UUID())
        for place in [couple, couple, other] { #expect(await admission.enter(place)) }
        let first = Task { await admission.enter(couple) }
        try await Self.waiting(admission, couple, count: 1)
        let second = Task { await admission.enter(couple) }
        try await Self.waiting(admission, couple, count: 2)
        admission.leave(couple)
        #expect(await first.value)
        #expect(admission.waiting(couple) == 1, "the second still waits")
        admission.leave(other)
        #expect(admission.waiting(couple) == 1, "another couple's place given back is not this couple's")
        admission.leave(couple)
        #expect(await second.value)
    }

    @Test("a request that finds no place within the wait, or whose task is cancelled, is turned away and holds none")
    func turnedAway() async throws {
        let admission = CoupleAdmission(limit: 1, wait: .milliseconds(50))
        let couple = UUID()
        #expect(await admission.enter(couple))
        #expect(await admission.enter(couple) == false)
        #expect(admission.waiting(couple) == 0)

        let patient = CoupleAdmission(limit: 1, wait: .seconds(60))
        #expect(await patient.enter(couple))
        let cancelled = Task { await patient.enter(couple) }
        try await Self.waiting(patient, couple, count: 1)
        cancelled.cancel()
        #expect(await cancelled.value == false)
        #expect(patient.waiting(couple) == 0)
        patient.leave(couple)
        #expect(await patient.enter(couple), "the place given back is free, not handed to the one cancelled")
    }

    @Test("many requests of one couple at once: never more than its places in at once, and every one in in the end")
    func racing() async throws {
        let admission = CoupleAdmission(limit: 3, wait: .seconds(60))
        let couple = UUID()
        var full = 0
        for _ in 0..<100 {
            let inside = Counter()
            let admitted = try await race(20) { _, go in
                await go()
                guard await admission.enter(couple) else { return false }
                inside.change(by: 1)
                await Task.yield()
                inside.change(by: -1)
                admission.leave(couple)
                return true
            }
            #expect(admitted.allSatisfy { $0 })
            #expect(inside.most <= 3 && inside.now == 0)
            full += inside.most == 3 ? 1 : 0
        }
        #expect(full > 0, "the requests really met: in some round, three were in at once")
        #expect(admission.waiting(couple) == 0)
        for _ in 0..<3 { #expect(await admission.enter(couple), "every place given back") }
    }
}

/// How many are inside now, and the most there were at once.
final class Counter: Sendable {
    private let state = Mutex((now: 0, most: 0))
    func change(by delta: Int) {
        state.withLock {
            $0.now += delta
            $0.most = max($0.most, $0.now)
        }
    }
    var now: Int { state.withLock { $0.now } }
    var most: Int { state.withLock { $0.most } }
}
