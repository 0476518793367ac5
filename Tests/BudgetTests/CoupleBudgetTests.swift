import Collaboration
import Foundation
import InMemoryRepositories
import Synchronization
import TestSupport
import Testing

@testable import Budget

private func money(_ text: String) -> Decimal { Decimal(string: text)! }

/// A couple with an owner and a viewer, its budget on in-memory repositories.
private struct World {
    let budgets: InMemoryBudgetRepository
    let budget: CoupleBudget
    let owner: Actor
    let viewer: Actor
    let stranger: Actor

    init() async throws {
        let roles = try PolicyDocument.load(from: repositoryRoot.appendingPathComponent("policies/policy.json"))
            .flattened()
        let members = InMemoryCollaborationRepository(roles: roles)
        let admin = Actor.operator(label: "test")
        let owner = try await members.addUser(email: EmailAddress(rawValue: "o@example.com")!, displayName: nil)
        let viewer = try await members.addUser(email: EmailAddress(rawValue: "v@example.com")!, displayName: nil)
        let stranger = try await members.addUser(email: EmailAddress(rawValue: "s@example.com")!, displayName: nil)
        let couple = try await members.createCouple(name: "C", owner: owner.id, as: admin)
        _ = try await members.createCouple(name: "Other", owner: stranger.id, as: admin)
        _ = try await members.grant(couple: couple.id, user: viewer.id, role: RoleName(rawValue: "viewer")!, as: admin)
        budgets = InMemoryBudgetRepository()
        budget = CoupleBudget(couple: couple.id, repository: budgets, checker: PermissionChecker(repository: members))
        self.owner = .user(owner.id)
        self.viewer = .user(viewer.id)
        self.stranger = .user(stranger.id)
    }
}

@Suite("Budget services on in-memory repositories")
struct CoupleBudgetTests {
    @Test("allocating 100.00 over three equal items, then changing the expense, keeps the sum exact")
    func allocation() async throws {
        let world = try await World()
        let b = world.budget
        let scenario = try await b.createScenario(named: "Main", primary: true, as: world.owner)
        var items: [UUID] = []
        for name in ["Venue", "Food", "Music"] {
            items.append(try await b.createItem(named: name, scenario: scenario.id, budgeted: 500, as: world.owner).id)
        }
        let expense = try await b.createExpense(named: "Deposit", amount: money("100.00"), as: world.owner)
        let split = try await b.allocate(expense: expense.id, scenario: scenario.id, items: items, as: world.owner)
        #expect(split.map(\.amount) == [money("33.34"), money("33.33"), money("33.33")])

        // The expense changes: its allocations scale with it and still add up exactly.
        let scaled = try await b.setAmount(expense: expense.id, to: money("0.01"), as: world.owner)
        #expect(scaled.reduce(0) { $0 + $1.amount } == money("0.01"))

        // An item's budget changes: the expense is re-split in proportion to the budgets.
        _ = try await b.setAmount(expense: expense.id, to: money("100.00"), as: world.owner)
        let resplit = try await b.setBudgeted(item: items[0], to: 1000, as: world.owner)
        let byItem = Dictionary(uniqueKeysWithValues: resplit.map { ($0.budgetItemID, $0.amount) })
        #expect(byItem[items[0]] == money("50.00"))
        #expect(byItem[items[1]] == money("25.00"))
        #expect(byItem[items[2]] == money("25.00"))

        let overview = try await b.overview(scenario: scenario.id, as: world.owner)
        #expect(overview.totals.budgeted == 2000)
        #expect(overview.totals.spent == money("100.00"))
    }

    @Test("explicit allocations may not exceed the expense, and the refusal changes nothing")
    func overAllocation() async throws {
        let world = try await World()
        let b = world.budget
        let scenario = try await b.createScenario(named: "Main", as: world.owner)
        let item = try await b.createItem(named: "Venue", scenario: scenario.id, budgeted: 500, as: world.owner)
        let expense = try await b.createExpense(named: "Deposit", amount: 100, as: world.owner)
        let before = world.budgets.snapshot.allocations
        await #expect(throws: BudgetError.self) {
            try await b.allocate(
                expense: expense.id, scenario: scenario.id, items: [item.id], amounts: [money("100.01")],
                as: world.owner)
        }
        #expect(world.budgets.snapshot.allocations == before)
    }

    @Test("without a scenario: an allocation goes to its items' scenario, refused across two; the primary is found")
    func unnamedScenario() async throws {
        let world = try await World()
        let b = world.budget
        #expect(try await b.primaryScenario(as: world.viewer) == nil)
        let main = try await b.createScenario(named: "Main", primary: true, as: world.owner)
        let other = try await b.createScenario(named: "Plan B", as: world.owner)
        #expect(try await b.primaryScenario(as: world.viewer) == main)
        await #expect(throws: BudgetError.self) { try await b.primaryScenario(as: world.stranger) }
        let hall = try await b.createItem(named: "Hall", scenario: main.id, budgeted: 500, as: world.owner)
        let barn = try await b.createItem(named: "Barn", scenario: other.id, budgeted: 500, as: world.owner)
        let expense = try await b.createExpense(named: "Deposit", amount: 100, as: world.owner)
        let split = try await b.allocate(expense: expense.id, scenario: nil, items: [barn.id], as: world.owner)
        #expect(split.map(\.scenarioID) == [other.id])
        let before = world.budgets.snapshot.allocations
        for items in [[barn.id, hall.id], [UUID()]] {
            await #expect(throws: BudgetError.self) {
                try await b.allocate(expense: expense.id, scenario: nil, items: items, as: world.owner)
            }
        }
        #expect(world.budgets.snapshot.allocations == before)
    }

    @Test("the overview sums allocations and received gifts per item, and is recomputed after a change")
    func overview() async throws {
        let world = try await World()
        let b = world.budget
        let scenario = try await b.createScenario(named: "Main", as: world.owner)
        let venue = try await b.createItem(named: "Venue", scenario: scenario.id, budgeted: 5000, as: world.owner)
        let cake = try await b.createItem(named: "Cake", scenario: scenario.id, budgeted: 300, as: world.owner)
        let expense = try await b.createExpense(named: "Hall", amount: 4000, as: world.owner)
        _ = try await b.allocate(
            expense: expense.id, scenario: scenario.id, items: [venue.id], amounts: [3000], as: world.owner)
        _ = try await b.recordGift(from: "Gran", amount: 500, received: true, budgetItem: venue.id, as: world.owner)
        _ = try await b.recordGift(from: "Uncle", amount: 200, received: false, budgetItem: venue.id, as: world.owner)

        let first = try await b.overview(scenario: scenario.id, as: world.viewer)
        let line = try #require(first.items.first { $0.item.id == venue.id })
        #expect(line.spent == 3000 && line.gifts == 500 && line.effectiveSpent == 2500 && line.remaining == 2500)
        #expect(line.expenses.map(\.name) == ["Hall"])
        #expect(line.giftLinks.count == 2)
        #expect(first.items.first { $0.item.id == cake.id }?.spent == 0)
        #expect(first.totals.effectiveSpent == 2500)

        _ = try await b.allocate(
            expense: expense.id, scenario: scenario.id, items: [venue.id, cake.id], amounts: [3000, 1000],
            as: world.owner)
        let second = try await b.overview(scenario: scenario.id, as: world.viewer)
        #expect(second.totals.spent == 4000)
        #expect(second.revision > first.revision)
    }

    @Test("a viewer may read but not edit; a member of another couple may do neither; nothing changes")
    func permissions() async throws {
        let world = try await World()
        let b = world.budget
        let scenario = try await b.createScenario(named: "Main", as: world.owner)
        let before = world.budgets.snapshot
        for attempt in [
            { _ = try await b.createScenario(named: "Mine", as: world.viewer) },
            { _ = try await b.createExpense(named: "X", amount: 1, as: world.viewer) },
            { _ = try await b.recordGift(from: "X", amount: 1, received: true, as: world.viewer) },
            { _ = try await b.overview(scenario: scenario.id, as: world.stranger) },
            { _ = try await b.scenarios(as: world.stranger) },
        ] as [@Sendable () async throws -> Void] {
            let error = await #expect(throws: BudgetError.self) { try await attempt() }
            #expect(error?.code == .permissionDenied)
        }
        #expect(world.budgets.snapshot.revision == before.revision)
        #expect(try await b.scenarios(as: world.viewer).count == 1)
    }

    @Test("cloning copies folders, items and allocations under new ids")
    func clone() async throws {
        let world = try await World()
        let b = world.budget
        let scenario = try await b.createScenario(named: "Main", primary: true, as: world.owner)
        let folder = try await b.createFolder(named: "Party", scenario: scenario.id, as: world.owner)
        let item = try await b.createItem(
            named: "Band", scenario: scenario.id, budgeted: 800, folder: folder.id, event: "Reception", as: world.owner)
        let expense = try await b.createExpense(named: "Band deposit", amount: 200, as: world.owner)
        _ = try await b.allocate(expense: expense.id, scenario: scenario.id, items: [item.id], as: world.owner)

        let copy = try await b.cloneScenario(scenario.id, named: "Cheaper", as: world.owner)
        let items = try await b.items(scenario: copy.id, as: world.owner)
        let folders = try await b.folders(scenario: copy.id, as: world.owner)
        #expect(items.count == 1 && items[0].id != item.id && items[0].folderID == folders.first?.id)
        #expect(try await b.overview(scenario: copy.id, as: world.owner).totals.spent == 200)
        #expect(try await b.eventCategories(scenario: copy.id, as: world.owner).events == ["Reception"])
        #expect(try await b.setPrimaryScenario(copy.id, as: world.owner).isPrimary)
        #expect(try await b.scenarios(as: world.owner).filter(\.isPrimary).map(\.id) == [copy.id])
    }
}

/// In-memory storage where a write lands during every parallel read of an overview (it adds a folder while
/// the allocations are read), so the revision always moves under them; it counts the snapshot reads.
private final class ChurningBudgetRepository: BudgetRepository {
    let inner = InMemoryBudgetRepository()
    let snapshotReads = Mutex(0)

    func revision(couple: UUID, scenario: UUID) async throws -> (revision: Int64, scenarioExists: Bool) {
        try await inner.revision(couple: couple, scenario: scenario)
    }
    func items(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [BudgetItem] {
        try await inner.items(couple: couple, scenario: scenario, page: page)
    }
    func allocationCents(couple: UUID, scenario: UUID) async throws -> [[AllocationCents]] {
        _ = try await inner.createFolder(
            couple: couple, scenario: scenario, name: "churn", as: .operator(label: "churn"))
        return try await inner.allocationCents(couple: couple, scenario: scenario)
    }
    func expenseNames(couple: UUID) async throws -> [UUID: String] { try await inner.expenseNames(couple: couple) }
    func linkedGifts(couple: UUID, scenario: UUID) async throws -> [Gift] {
        try await inner.linkedGifts(couple: couple, scenario: scenario)
    }
    func overviewSnapshot(couple: UUID, scenario: UUID) async throws -> OverviewSnapshot {
        snapshotReads.withLock { $0 += 1 }
        return try await inner.overviewSnapshot(couple: couple, scenario: scenario)
    }
    func scenarios(couple: UUID, page: PageRequest<Date>?) async throws -> [Scenario] {
        try await inner.scenarios(couple: couple, page: page)
    }
    func createScenario(couple: UUID, name: String, primary: Bool, as actor: Actor) async throws -> Scenario {
        try await inner.createScenario(couple: couple, name: name, primary: primary, as: actor)
    }
    func cloneScenario(couple: UUID, source: UUID, name: String, as actor: Actor) async throws -> Scenario {
        try await inner.cloneScenario(couple: couple, source: source, name: name, as: actor)
    }
    func setPrimaryScenario(couple: UUID, scenario: UUID, as actor: Actor) async throws -> Scenario {
        try await inner.setPrimaryScenario(couple: couple, scenario: scenario, as: actor)
    }
    func renameScenario(couple: UUID, scenario: UUID, to name: String, as actor: Actor) async throws -> Scenario {
        try await inner.renameScenario(couple: couple, scenario: scenario, to: name, as: actor)
    }
    func folders(couple: UUID, scenario: UUID, page: PageRequest<String>?) async throws -> [Folder] {
        try await inner.folders(couple: couple, scenario: scenario, page: page)
    }
    func createFolder(couple: UUID, scenario: UUID, name: String, as actor: Actor) async throws -> Folder {
        try await inner.createFolder(couple: couple, scenario: scenario, name: name, as: actor)
    }
    func renameFolder(couple: UUID, folder: UUID, to name: String, as actor: Actor) async throws -> Folder {
        try await inner.renameFolder(couple: couple, folder: folder, to: name, as: actor)
    }
    func createItem(couple: UUID, _ item: BudgetItem, as actor: Actor) async throws -> BudgetItem {
        try await inner.createItem(couple: couple, item, as: actor)
    }
    func expenses(couple: UUID, page: PageRequest<DueAndName>?) async throws -> [Expense] {
        try await inner.expenses(couple: couple, page: page)
    }
    func createExpense(couple: UUID, _ expense: Expense, as actor: Actor) async throws -> Expense {
        try await inner.createExpense(couple: couple, expense, as: actor)
    }
    func payments(couple: UUID, expenses: [UUID]?) async throws -> [ExpensePayment] {
        try await inner.payments(couple: couple, expenses: expenses)
    }
    func payments(couple: UUID, expense: UUID, page: PageRequest<CalendarDay>?) async throws -> [ExpensePayment]? {
        try await inner.payments(couple: couple, expense: expense, page: page)
    }
    func addPayment(couple: UUID, _ payment: ExpensePayment, as actor: Actor) async throws -> ExpensePayment {
        try await inner.addPayment(couple: couple, payment, as: actor)
    }
    func gifts(couple: UUID, page: PageRequest<String>?) async throws -> [Gift] {
        try await inner.gifts(couple: couple, page: page)
    }
    func createGift(couple: UUID, _ gift: Gift, as actor: Actor) async throws -> Gift {
        try await inner.createGift(couple: couple, gift, as: actor)
    }
    func withBudgetLock<T: Sendable>(
        couple: UUID, as actor: Actor, _ body: (any BudgetTransaction) async throws -> T
    ) async throws -> T {
        try await inner.withBudgetLock(couple: couple, as: actor, body)
    }

    func rowLimits(couple: UUID?) async throws -> [BudgetRowLimit] { try await inner.rowLimits(couple: couple) }

    func setRowLimits(_ limits: [(table: String, maxRows: Int)]) async throws {
        try await inner.setRowLimits(limits)
    }
}

@Suite("Overviews while the budget keeps changing")
struct OverviewFallbackTests {
    @Test("when a write lands during each parallel read, the overview is read from one snapshot, not refused")
    func snapshotFallback() async throws {
        let couple = UUID()
        let repository = ChurningBudgetRepository()
        let admin = Actor.operator(label: "test")
        let roles = try PolicyDocument.load(from: repositoryRoot.appendingPathComponent("policies/policy.json"))
            .flattened()
        let budget = CoupleBudget(
            couple: couple, repository: repository,
            checker: PermissionChecker(repository: InMemoryCollaborationRepository(roles: roles)))
        let scenario = try await budget.createScenario(named: "Main", as: admin)
        let item = try await budget.createItem(named: "Venue", scenario: scenario.id, budgeted: 500, as: admin)
        let expense = try await budget.createExpense(named: "Deposit", amount: money("120.00"), as: admin)
        _ = try await budget.allocate(expense: expense.id, scenario: scenario.id, items: [item.id], as: admin)

        let overview = try await budget.overview(scenario: scenario.id, as: admin)
        #expect(repository.snapshotReads.withLock { $0 } == 1)
        #expect(overview.revision == repository.inner.snapshot.revision)
        #expect(overview.totals.spent == money("120.00"))
        #expect(overview.items.map(\.expenses) == [[.init(expenseID: expense.id, name: "Deposit", allocated: 120)]])
        // Nothing has changed since: the cached overview answers, with no read at all.
        #expect(try await budget.overview(scenario: scenario.id, as: admin) == overview)
        #expect(repository.snapshotReads.withLock { $0 } == 1)
    }
}

@Suite("The registry of per-couple actors")
struct BudgetRegistryTests {
    private func registry(capacity: Int, clock: SteppedClock) throws -> BudgetRegistry {
        let roles = try PolicyDocument.load(from: repositoryRoot.appendingPathComponent("policies/policy.json"))
            .flattened()
        let checker = PermissionChecker(repository: InMemoryCollaborationRepository(roles: roles))
        let repository = InMemoryBudgetRepository()
        return BudgetRegistry(
            capacity: capacity, idleAfter: .seconds(60), now: { clock.now },
            make: { CoupleBudget(couple: $0, repository: repository, checker: checker) })
    }

    @Test("one actor per couple, made on first use; idle ones are dropped, busy ones never")
    func lifecycle() async throws {
        let clock = SteppedClock()
        let registry = try registry(capacity: 2, clock: clock)
        let (a, b, c) = (UUID(), UUID(), UUID())
        let first = try await registry.with(a) { $0 }
        #expect(try await registry.with(a) { $0 } === first)
        #expect(try await registry.with(b) { $0 } !== first)
        #expect(registry.count == 2)
        // Over capacity: the least recently used idle couple goes.
        clock.advance(.seconds(1))
        _ = try await registry.with(b) { $0 }
        _ = try await registry.with(c) { $0 }
        #expect(registry.count == 2)
        #expect(try await registry.with(a) { $0 } !== first, "a was evicted and made anew")
        // A couple with work in flight is kept even when idle time and capacity say otherwise.
        try await registry.with(a) { busy in
            clock.advance(.seconds(120))
            _ = try await registry.with(UUID()) { $0 }
            _ = try await registry.with(UUID()) { $0 }
            #expect(try await registry.with(a) { $0 } === busy)
        }
        #expect(registry.count <= 3)
    }

    @Test("a full registry drops the idle actor used least recently, whatever order they were made in")
    func leastRecentlyUsedFirst() async throws {
        let clock = SteppedClock()
        let registry = try registry(capacity: 3, clock: clock)
        let (a, b, c) = (UUID(), UUID(), UUID())
        var made: [UUID: CoupleBudget] = [:]
        for couple in [a, b, c, a] {
            clock.advance(.seconds(1))
            made[couple] = try await registry.with(couple) { $0 }
        }
        // Least recently used first: b, c, a. Two newcomers take the room of b, then of c.
        for _ in 0..<2 {
            clock.advance(.seconds(1))
            _ = try await registry.with(UUID()) { $0 }
        }
        #expect(registry.count == 3)
        #expect(try await registry.with(a) { $0 } === made[a], "a, made first but used last of the three, stays")
        #expect(try await registry.with(b) { $0 } !== made[b])
        #expect(try await registry.with(c) { $0 } !== made[c])
    }

    @Test("tasks crowding a small registry, its clock running on: never two actors of one couple in use at once")
    func oneActorPerCoupleAtOnce() async throws {
        let clock = SteppedClock()
        let made = Mutex(0)
        let checker = PermissionChecker(repository: InMemoryCollaborationRepository(roles: []))
        let registry = BudgetRegistry(
            capacity: 2, idleAfter: .seconds(60), now: { clock.now },
            make: { couple in
                made.withLock { $0 += 1 }
                return CoupleBudget(couple: couple, repository: InMemoryBudgetRepository(), checker: checker)
            })
        // More couples than room, and tasks that meet on them: actors are dropped and made anew all along.
        let couples = (0..<6).map { _ in UUID() }
        // Per couple, the actor its users hold now and how many they are.
        let inUse = Mutex<[UUID: (actor: ObjectIdentifier, users: Int)]>([:])
        let tally = Mutex((clashes: 0, shared: 0))
        for _ in 0..<100 {
            _ = try await race(8) { _, go in
                await go()
                for _ in 0..<40 {
                    let couple = couples.randomElement()!
                    try await registry.with(couple) { budget in
                        let actor = ObjectIdentifier(budget)
                        let users = inUse.withLock { inUse -> Int in
                            if let holder = inUse[couple], holder.actor != actor {
                                tally.withLock { $0.clashes += 1 }
                                return 0
                            }
                            inUse[couple, default: (actor, 0)].users += 1
                            return inUse[couple]!.users
                        }
                        if users > 1 { tally.withLock { $0.shared += 1 } }
                        // Time passes while some actors are busy, so that sweeps find busy ones long unused.
                        if Int.random(in: 0..<4) == 0 { clock.advance(.seconds(20)) }
                        await Task.yield()
                        if users > 0 {
                            inUse.withLock { inUse in
                                inUse[couple]!.users -= 1
                                if inUse[couple]!.users == 0 { inUse[couple] = nil }
                            }
                        }
                    }
                }
            }
        }
        let (clashes, shared) = tally.withLock { $0 }
        #expect(clashes == 0, "a couple's second actor was handed out while its first was in use")
        #expect(shared > 0, "no two tasks ever held one couple's actor at once: the race did not happen")
        #expect(made.withLock { $0 } > couples.count, "no actor was dropped and made anew")
    }

    @Test("idle actors are swept out by any couple's traffic, not only when a new couple comes")
    func idleSweep() async throws {
        let clock = SteppedClock()
        let registry = try registry(capacity: 10, clock: clock)
        let (a, b) = (UUID(), UUID())
        let first = try await registry.with(a) { $0 }
        _ = try await registry.with(b) { $0 }
        clock.advance(.seconds(30))
        _ = try await registry.with(b) { $0 }
        #expect(registry.count == 2, "a has been idle for 30 s of 60")
        clock.advance(.seconds(45))
        _ = try await registry.with(b) { $0 }
        #expect(registry.count == 1, "a, idle for 75 s, is gone; b, used 45 s ago, stays")
        #expect(try await registry.with(a) { $0 } !== first)
        // No traffic at all: sweepIdle alone lets go of them, once they have been idle long enough.
        clock.advance(.seconds(59))
        registry.sweepIdle()
        #expect(registry.count == 2)
        clock.advance(.seconds(1))
        registry.sweepIdle()
        #expect(registry.count == 0)
    }
}
