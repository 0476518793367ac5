import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization
import TestSupport
import Testing

@testable import Server

@Suite("How many requests of one couple, and changes in all, are answered at once")
struct CoupleAdmissionTests {
    /// Waits until `count` requests wait for one of the couple's places (nil: for one of all); fails
    /// after 10 s instead of hanging.
    static func waiting(_ admission: CoupleAdmission, _ couple: UUID?, count: Int) async throws {
        func waiting() -> Int { couple.map(admission.waiting) ?? admission.waitingForAny }
        let lined = try await eventually(within: .seconds(10), every: .milliseconds(1)) { waiting() >= count }
        try #require(lined, "\(waiting()) waiting, not \(count)")
    }

    @Test("a couple's places are its own; the rest wait, each taking a place given back in the order they came")
    func inTurn() async throws {
        let admission = CoupleAdmission(limit: 2, total: 4, wait: .seconds(60))
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
        let admission = CoupleAdmission(limit: 1, total: 2, wait: .milliseconds(50))
        let couple = UUID()
        #expect(await admission.enter(couple))
        #expect(await admission.enter(couple) == false)
        #expect(admission.waiting(couple) == 0)

        let patient = CoupleAdmission(limit: 1, total: 2, wait: .seconds(60))
        #expect(await patient.enter(couple))
        let cancelled = Task { await patient.enter(couple) }
        try await Self.waiting(patient, couple, count: 1)
        cancelled.cancel()
        #expect(await cancelled.value == false)
        #expect(patient.waiting(couple) == 0)
        patient.leave(couple)
        #expect(await patient.enter(couple), "the place given back is free, not handed to the one cancelled")
    }

    @Test("all couples share their places: one with a place of its own waits for one of all, and gives it back")
    func sharedByAll() async throws {
        let admission = CoupleAdmission(limit: 2, total: 3, wait: .seconds(60))
        let couples = (0..<4).map { _ in UUID() }
        for couple in couples.prefix(3) { #expect(await admission.enter(couple)) }
        let last = Task { await admission.enter(couples[3]) }
        try await Self.waiting(admission, nil, count: 1)
        #expect(admission.waiting(couples[3]) == 0, "it has one of its couple's places")
        admission.leave(couples[0])
        #expect(await last.value)

        // Turned away while waiting for one of all, it gives back the couple's place it held.
        let brief = CoupleAdmission(limit: 1, total: 1, wait: .milliseconds(50))
        #expect(await brief.enter(couples[0]))
        #expect(await brief.enter(couples[1]) == false)
        #expect(brief.waitingForAny == 0)
        brief.leave(couples[0])
        #expect(await brief.enter(couples[1]), "the couple's place it held was given back")
    }

    @Test(
        """
        a path whose couple is no id waits for no couple's place, though Foundation would read it as one; outside \
        couples, a request waits for one of all only where changes are
        """)
    func outsideCouples() async throws {
        let admission = CoupleAdmission(limit: 1, total: 1, wait: .milliseconds(200))
        let router = Router()
        router.group().add(middleware: CoupleAdmissionMiddleware(admission: admission, outsideCouples: false))
            .get("couples/:couple") { _, _ in "on to the route" }
            .get("users") { _, _ in "read" }
        router.group().add(middleware: CoupleAdmissionMiddleware(admission: admission, outsideCouples: true))
            .delete("users") { _, _ in "changed" }
        let couple = try #require(UUID(uuidString: "a9f7e979-05d6-4d8e-9d0a-0c5f7d6e8a91"))
        // sscanf, which `UUID(uuidString:)` reads with on Linux, takes "+5d6" for 05D6.
        let malformed = "a9f7e979-+5d6-4d8e-9d0a-0c5f7d6e8a91"
        #expect(UUID(parsing: malformed) == nil)
        #expect(await admission.enter(couple))
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/couples/\(malformed)", method: .get) { response in
                #expect(response.status == .ok, "not 503 after waiting for the couple it is not")
                #expect(String(buffer: response.body) == "on to the route")
            }
            try await client.execute(uri: "/couples/\(couple)", method: .get) { response in
                #expect(response.status == .serviceUnavailable, "the couple's one place is taken")
            }
            try await client.execute(uri: "/users", method: .get) { response in
                #expect(response.status == .ok, "a read outside couples takes no place")
            }
            try await client.execute(uri: "/users", method: .delete) { response in
                #expect(response.status == .serviceUnavailable, "a change outside couples waits for one of all")
                #expect(String(buffer: response.body).contains("try again shortly"))
            }
        }
        admission.leave(couple)
        #expect(await admission.enter(nil), "the change turned away holds no place")
        admission.leave(nil)
    }

    @Test(
        """
        many requests of four couples and outside couples at once: never more than a couple's places, nor all, in at \
        once, and every one in in the end
        """)
    func racing() async throws {
        let admission = CoupleAdmission(limit: 3, total: 5, wait: .seconds(60))
        let couples = (0..<4).map { _ in UUID() }
        var full = 0
        for _ in 0..<100 {
            let (all, each) = (Counter(), couples.map { _ in Counter() })
            // One request in five is outside couples: it takes a place among all alone.
            let admitted = try await race(25) { index, go in
                let couple = index % (couples.count + 1)
                let id = couples.indices.contains(couple) ? couples[couple] : nil
                await go()
                guard await admission.enter(id) else { return false }
                all.change(by: 1)
                if id != nil { each[couple].change(by: 1) }
                await Task.yield()
                if id != nil { each[couple].change(by: -1) }
                all.change(by: -1)
                admission.leave(id)
                return true
            }
            #expect(admitted.allSatisfy { $0 })
            #expect(all.most <= 5 && all.now == 0)
            #expect(each.allSatisfy { $0.most <= 3 && $0.now == 0 })
            full += all.most == 5 ? 1 : 0
        }
        #expect(full > 0, "the requests really met: in some round, five were in at once")
        #expect(couples.allSatisfy { admission.waiting($0) == 0 } && admission.waitingForAny == 0)
        for couple in [couples[0], couples[0], couples[0], couples[1], couples[1]] {
            #expect(await admission.enter(couple), "every place given back")
        }
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
