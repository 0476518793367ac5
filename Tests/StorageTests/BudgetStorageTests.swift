import Budget
import Collaboration
import Foundation
import Postgres
import Storage
import Synchronization
import TestSupport
import Testing

private func money(_ text: String) -> Decimal { Decimal(string: text)! }

/// A couple with an owner and a viewer, and a stranger who owns another couple, on a migrated database.
private struct BudgetWorld {
    let pool: PostgresConnectionPool
    let couple: UUID
    let owner: Actor
    let viewer: Actor
    let stranger: Actor
    let repository: PostgresBudgetRepository

    init(_ pool: PostgresConnectionPool) async throws {
        self.pool = pool
        let owner = try await pool.newUser()
        let viewer = try await pool.newUser()
        let stranger = try await pool.newUser()
        couple = try await pool.newCouple(members: [(owner, "owner"), (viewer, "viewer")])
        _ = try await pool.newCouple(members: [(stranger, "owner")])
        self.owner = .user(owner)
        self.viewer = .user(viewer)
        self.stranger = .user(stranger)
        repository = PostgresBudgetRepository(pool: pool)
    }

    /// A new actor for the couple, as another process would have.
    func budget() -> CoupleBudget {
        CoupleBudget(
            couple: couple, repository: repository,
            checker: PermissionChecker(repository: PostgresCollaborationRepository(pool: pool)))
    }

    /// A budget the owner made: a scenario with one item (100.00) and one expense (50.00), not yet allocated.
    func smallBudget() async throws -> (CoupleBudget, Scenario, BudgetItem, Expense) {
        let b = budget()
        let scenario = try await b.createScenario(named: "Main", as: owner)
        let item = try await b.createItem(named: "Venue", scenario: scenario.id, budgeted: 100, as: owner)
        return (b, scenario, item, try await b.createExpense(named: "Hall", amount: 50, as: owner))
    }

    /// Every budget row of the database, as text: to prove that a refusal changed nothing.
    func dump() async throws -> [String] {
        try await pool.query(
            """
            SELECT t::text AS row FROM (
                SELECT 's' || b::text AS t FROM budget_scenarios b UNION ALL SELECT 'i' || b::text FROM budget_items b
                UNION ALL SELECT 'e' || b::text FROM expenses b UNION ALL SELECT 'a' || b::text FROM expense_allocations b
                UNION ALL SELECT 'g' || b::text FROM gifts_and_owed b UNION ALL SELECT 'p' || b::text FROM expense_payments b
                UNION ALL SELECT 'r' || b::text FROM budget_revisions b UNION ALL SELECT 'l' || b::text FROM audit_log b
            ) rows ORDER BY 1
            """
        ).map { try $0.decode("row") }
    }
}

@Suite("Budget services on PostgreSQL")
struct BudgetStorageTests {
    @Test("scenarios, items, expenses, allocation, gifts, payments and the overview, end to end")
    func endToEnd() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let b = world.budget()
            let scenario = try await b.createScenario(named: "Main", primary: true, as: world.owner)
            let folder = try await b.createFolder(named: "Reception", scenario: scenario.id, as: world.owner)
            var items: [UUID] = []
            for name in ["Venue", "Food", "Music"] {
                items.append(
                    try await b.createItem(
                        named: name, scenario: scenario.id, budgeted: 1000, folder: folder.id, category: "party",
                        as: world.owner
                    ).id)
            }
            let expense = try await b.createExpense(
                named: "Deposit", amount: money("100.00"), vendor: "Hall & Co", dueDate: CalendarDay("2026-01-01"),
                as: world.owner)
            let split = try await b.allocate(expense: expense.id, scenario: scenario.id, items: items, as: world.owner)
            #expect(split.map(\.amount).sorted() == [money("33.33"), money("33.33"), money("33.34")])
            // The first and the last day a date may be are stored and read back as they were given.
            for day in ["0001-01-01", "9999-12-31"] {
                let due = try #require(CalendarDay(day))
                let edited = try await b.editExpense(expense.id, ExpenseEdit(dueDate: .some(due)), as: world.owner)
                #expect(edited.dueDate == due)
                #expect(try await b.expenses(as: world.owner).first { $0.id == expense.id }?.dueDate == due)
            }
            _ = try await b.editExpense(expense.id, ExpenseEdit(dueDate: expense.dueDate), as: world.owner)
            _ = try await b.recordGift(from: "Gran", amount: 20, received: true, budgetItem: items[0], as: world.owner)
            _ = try await b.recordPayment(expense: expense.id, amount: 40, as: world.owner)

            let overview = try await b.overview(scenario: scenario.id, as: world.viewer)
            #expect(overview.totals.budgeted == 3000)
            #expect(overview.totals.spent == money("100.00"))
            #expect(overview.totals.gifts == 20)
            #expect(overview.totals.effectiveSpent == money("80.00"))
            #expect(overview.items.count == 3)

            // The expense grows: every scenario's allocations scale and add up exactly.
            let copy = try await b.cloneScenario(scenario.id, named: "Copy", as: world.owner)
            _ = try await b.setAmount(expense: expense.id, to: money("200.01"), as: world.owner)
            for id in [scenario.id, copy.id] {
                #expect(try await b.overview(scenario: id, as: world.owner).totals.spent == money("200.01"))
            }
            #expect(try await b.items(scenario: copy.id, as: world.owner).allSatisfy { $0.folderID != nil })

            let status = try #require(try await b.paymentStatuses(as: world.viewer).first)
            #expect(status.status == .partial && status.paid == 40 && status.isOverdue)
            #expect(try await b.scenarios(as: world.viewer).filter(\.isPrimary).map(\.id) == [scenario.id])
        }
    }

    @Test("budget writes are in the audit log, each with the member or operator who made it")
    func audited() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let (b, scenario, item, expense) = try await world.smallBudget()
            _ = try await b.allocate(expense: expense.id, scenario: scenario.id, items: [item.id], as: world.owner)
            _ = try await b.setAmount(expense: expense.id, to: 80, as: .operator(label: "finance-bot"))
            guard case .user(let owner) = world.owner else { throw TestSetupError("the owner is a user") }
            let rows = try await pool.query(
                """
                SELECT action, actor_label, before ->> 'amount' AS before, after ->> 'amount' AS after FROM audit_log
                WHERE couple_id = \(world.couple) AND action NOT LIKE 'membership.%' AND action <> 'couple.insert'
                ORDER BY id
                """
            ).map { row -> String in
                let amounts = [try row.decode("before", as: String?.self), try row.decode("after", as: String?.self)]
                return "\(try row.decode("action", as: String.self)) \(try row.decode("actor_label", as: String.self))"
                    + amounts.map { $0.map { " " + $0 } ?? "" }.joined()
            }
            let user = "user:\(owner.uuidString.lowercased())"
            #expect(
                rows == [
                    "budget_scenario.insert \(user)", "budget_item.insert \(user)", "expense.insert \(user) 50.00",
                    "allocation.insert \(user) 50.00", "expense.update operator:finance-bot 50.00 80.00",
                    "allocation.update operator:finance-bot 50.00 80.00",
                ])
        }
    }

    @Test("a write is three round trips: BEGIN with the couple's hold and who acts, the write, COMMIT")
    func writeRoundTrips() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let gift = Gift(id: UUID(), from: "Aunt May", amount: 25, received: true, budgetItemID: nil)
            let before = pool.statementsSent
            _ = try await world.repository.createGift(couple: world.couple, gift, as: world.owner)
            #expect(pool.statementsSent - before == 3)
            #expect(try await world.repository.gifts(couple: world.couple, page: nil) == [gift])
            guard case .user(let owner) = world.owner else { throw TestSetupError("the owner is a user") }
            #expect(
                try await pool.query(
                    "SELECT actor_label FROM audit_log WHERE couple_id = \(world.couple) AND action = 'gift.insert'"
                ).map { try $0.decode("actor_label", as: String.self) } == ["user:\(owner.uuidString.lowercased())"])

            // No couple, nothing to hold: refused before the write, which no foreign key stops on Citus.
            let nowhere = UUID()
            let error = await #expect(throws: BudgetError.self) {
                _ = try await world.repository.createGift(couple: nowhere, gift, as: .operator(label: "t"))
            }
            #expect(error?.code == .notFound)
            #expect(error?.message == "couple \(nowhere.uuidString.lowercased()) does not exist")
            #expect(try await pool.count("SELECT count(*) FROM gifts_and_owed") == 1)
        }
    }

    @Test("a viewer's edits and a stranger's reads are refused, and the database is exactly as before")
    func refusals() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let (b, scenario, item, expense) = try await world.smallBudget()
            let before = try await world.dump()
            let attempts: [@Sendable () async throws -> Void] = [
                { _ = try await b.createItem(named: "X", scenario: scenario.id, budgeted: 1, as: world.viewer) },
                { _ = try await b.setBudgeted(item: item.id, to: 5, as: world.viewer) },
                {
                    _ = try await b.allocate(
                        expense: expense.id, scenario: scenario.id, items: [item.id], as: world.viewer)
                },
                { _ = try await b.recordPayment(expense: expense.id, amount: 1, as: world.viewer) },
                { _ = try await b.delete(.expense, id: expense.id, as: world.viewer) },
                { _ = try await b.editExpense(expense.id, ExpenseEdit(name: "Mine"), as: world.viewer) },
                { _ = try await b.editGift(UUID(), GiftEdit(received: true), as: world.viewer) },
                { _ = try await b.editItem(item.id, ItemEdit(name: "Mine"), as: world.viewer) },
                { _ = try await b.delete(.scenario, id: scenario.id, as: world.viewer) },
                { _ = try await b.delete(.item, id: item.id, as: world.stranger) },
                { _ = try await b.overview(scenario: scenario.id, as: world.stranger) },
                { _ = try await b.expenses(as: world.stranger) },
            ]
            for attempt in attempts {
                let error = await #expect(throws: BudgetError.self) { try await attempt() }
                #expect(error?.code == .permissionDenied)
            }
            #expect(try await world.dump() == before)
            // Bad input from someone allowed: refused too, with nothing changed.
            let other = try await b.createScenario(named: "Other", as: world.owner)
            let afterOther = try await world.dump()
            let invalid: [@Sendable () async throws -> Void] = [
                {
                    _ = try await b.allocate(expense: expense.id, scenario: other.id, items: [item.id], as: world.owner)
                },
                {
                    _ = try await b.allocate(
                        expense: expense.id, scenario: scenario.id, items: [item.id], amounts: [51], as: world.owner)
                },
                { _ = try await b.createItem(named: "X", scenario: UUID(), budgeted: 1, as: world.owner) },
                { _ = try await b.createItem(named: "X", scenario: scenario.id, budgeted: -1, as: world.owner) },
                { _ = try await b.recordPayment(expense: UUID(), amount: 1, as: world.owner) },
                { _ = try await b.delete(.expense, id: UUID(), as: world.owner) },
                {
                    _ = try await b.createExpense(
                        named: "'; DROP TABLE expenses; --", amount: money("0.001"), as: world.owner)
                },
            ]
            for attempt in invalid {
                let error = await #expect(throws: BudgetError.self) { try await attempt() }
                #expect(error?.code == .notFound || error?.code == .invalidInput)
            }
            #expect(try await world.dump() == afterOther)
        }
    }

    @Test("an overview costs the same number of statements at 10 and at 1,000 items", arguments: [10, 1_000])
    func statementCount(items: Int) async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let scenario = try await world.budget().createScenario(named: "Main", as: .operator(label: "t"))
            try await Self.seed(pool, couple: world.couple, scenario: scenario.id, items: items)
            let b = world.budget()
            let before = pool.statementsSent
            let overview = try await b.overview(scenario: scenario.id, as: .operator(label: "t"))
            #expect(pool.statementsSent - before == 7)
            #expect(overview.items.count == items)
            #expect(overview.totals.spent == Decimal(items * 2 * 10))
            // Unchanged data: the cached overview costs one statement.
            let again = pool.statementsSent
            #expect(try await b.overview(scenario: scenario.id, as: .operator(label: "t")) == overview)
            #expect(pool.statementsSent - again == 1)
        }
    }

    @Test("each couple's budget is read where it is stored: on Citus on the worker holding it, else the one server")
    func readsWhereStored() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let reads = BudgetReadPools(coordinator: pool)
            try await ensuring {
                let admin = Actor.operator(label: "t")
                let checker = PermissionChecker(repository: PostgresCollaborationRepository(pool: pool))
                let coordinatorRead = PostgresBudgetRepository(pool: pool)
                let storedRead = PostgresBudgetRepository(pool: pool, reads: reads)
                var ports: Set<Int> = []
                // On Citus, couples until both workers have held one (a couple's shard lands on either).
                for _ in 0..<40 where ports.count < max(TestDatabase.citusWorkers.count, 1) {
                    let couple = try await pool.newCouple(members: [])
                    let scenario = try await CoupleBudget(couple: couple, repository: coordinatorRead, checker: checker)
                        .createScenario(named: "Main", as: admin)
                    try await Self.seed(pool, couple: couple, scenario: scenario.id, items: 20)
                    let reader = try await reads.read(couple) { $0 }
                    let port: Int = try await reader.query("SELECT current_setting('port')::int AS port")[0]
                        .decode("port")
                    ports.insert(port)
                    if TestDatabase.citusWorkers.isEmpty {
                        #expect(reader === pool)
                    } else {
                        let holder: Int = try await pool.query(
                            """
                            SELECT nodeport FROM citus_shards
                            WHERE table_name = 'expense_allocations'::regclass
                              AND shardid = get_shard_id_for_distribution_column('expense_allocations', \(couple))
                            """)[0].decode("nodeport")
                        #expect(port == holder)
                    }
                    // The node is remembered: the overview's seven statements all go to it.
                    let before = (coordinator: pool.statementsSent, reader: reader.statementsSent)
                    let stored = try await CoupleBudget(couple: couple, repository: storedRead, checker: checker)
                        .overview(scenario: scenario.id, as: admin)
                    #expect(reader.statementsSent - before.reader == 7)
                    #expect(pool.statementsSent - before.coordinator == (reader === pool ? 7 : 0))
                    let relayed = try await CoupleBudget(couple: couple, repository: coordinatorRead, checker: checker)
                        .overview(scenario: scenario.id, as: admin)
                    #expect(stored == relayed && stored.items.count == 20)
                    // And the fallback's snapshot, one transaction there.
                    let coordinatorStatements = pool.statementsSent
                    let snapshot = try await storedRead.overviewSnapshot(couple: couple, scenario: scenario.id)
                    #expect(pool.statementsSent - coordinatorStatements == 0 || reader === pool)
                    let relayedSnapshot = try await coordinatorRead.overviewSnapshot(
                        couple: couple, scenario: scenario.id)
                    #expect(
                        (snapshot.revision, snapshot.items, snapshot.allocations, snapshot.expenseNames, snapshot.gifts)
                            == (
                                relayedSnapshot.revision, relayedSnapshot.items, relayedSnapshot.allocations,
                                relayedSnapshot.expenseNames, relayedSnapshot.gifts
                            ))
                }
                // Every worker, and only workers; on plain PostgreSQL, the one server.
                #expect(ports.count == max(TestDatabase.citusWorkers.count, 1))
                #expect(TestDatabase.citusWorkers.isEmpty || ports == Set(TestDatabase.citusWorkers))
            } finally: {
                await reads.close()
            }
        }
    }

    @Test(
        "a worker this service cannot reach is set aside, and its couples are read through the coordinator",
        arguments: [false, true])
    func unreachableWorker(silent: Bool) async throws {
        // The placement lookup names a node on 127.0.0.1 that refuses connections (a port no longer listened
        // on) or accepts them and never answers (a socket listening that nothing reads).
        let listener = try listeningOnLoopback()
        if !silent { close(listener.socket) }
        defer { if silent { close(listener.socket) } }
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            try await pool.query(
                """
                CREATE OR REPLACE FUNCTION rbac.budget_node(p_couple uuid, OUT host text, OUT port integer)
                RETURNS SETOF record LANGUAGE sql AS $$ SELECT '127.0.0.1', \(literal: String(listener.port))::int $$
                """)
            let reports = Mutex<[String]>([])
            let clock = SteppedClock()
            let reads = BudgetReadPools(
                coordinator: pool, unreachable: { report in reports.withLock { $0.append(report) } },
                now: { clock.now })
            try await ensuring {
                let admin = Actor.operator(label: "t")
                let checker = PermissionChecker(repository: PostgresCollaborationRepository(pool: pool))
                let coordinatorRead = PostgresBudgetRepository(pool: pool)
                let storedRead = PostgresBudgetRepository(pool: pool, reads: reads)
                var overviews: [(stored: BudgetOverview, relayed: BudgetOverview)] = []
                for round in 0..<2 {
                    let couple = try await pool.newCouple(members: [])
                    let scenario = try await CoupleBudget(couple: couple, repository: coordinatorRead, checker: checker)
                        .createScenario(named: "Main", as: admin)
                    try await Self.seed(pool, couple: couple, scenario: scenario.id, items: 20)
                    let before = pool.statementsSent
                    let start = ContinuousClock.now
                    let stored = try await CoupleBudget(couple: couple, repository: storedRead, checker: checker)
                        .overview(scenario: scenario.id, as: admin)
                    // The lookup and the overview's seven statements, all on the coordinator: the first after
                    // the worker failed it, the others (and the next couple's) without trying the worker.
                    #expect(pool.statementsSent - before == 8)
                    if silent && round == 0 {
                        // Given up on well before the coordinator's own connect timeout.
                        #expect(ContinuousClock.now - start < .seconds(pool.configuration.connectTimeout))
                    }
                    let relayed = try await CoupleBudget(couple: couple, repository: coordinatorRead, checker: checker)
                        .overview(scenario: scenario.id, as: admin)
                    overviews.append((stored, relayed))
                }
                #expect(overviews.allSatisfy { $0.stored == $0.relayed && $0.stored.items.count == 20 })
                // Said once, with the worker it is about.
                let said = reports.withLock { $0 }
                #expect(said.count == 1)
                #expect(said.allSatisfy { $0.contains("worker 127.0.0.1:\(listener.port) go through the coordinator") })

                // Its while over, the worker is tried again: the read is answered, and the worker set aside again.
                clock.advance(BudgetReadPools.setAsideFor)
                let couple = try await pool.newCouple(members: [])
                let one = try await reads.read(couple) {
                    try await $0.query("SELECT 1 AS one")[0].decode("one", as: Int32.self)
                }
                #expect(one == 1)
                #expect(reports.withLock { $0.count } == 2, "set aside anew, and said so")
            } finally: {
                await reads.close()
            }
        }
    }

    @Test("a worker's pool no read has used for a while is closed, and opened again by the next read sent there")
    func idleWorkerClosed() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let stored = try await pool.newCouple(members: [])
            let other = try await pool.newCouple(members: [])
            // One couple's budget is placed on a "worker" that is this server over TCP; the other's on the
            // coordinator.
            try await pool.query(
                """
                CREATE OR REPLACE FUNCTION rbac.budget_node(p_couple uuid, OUT host text, OUT port integer)
                RETURNS SETOF record LANGUAGE sql
                AS $$ SELECT '127.0.0.1', current_setting('port')::int WHERE p_couple = \(literal: "\(stored)") $$
                """)
            let (clock, lifetime) = (SteppedClock(), Duration.seconds(300))
            let reads = BudgetReadPools(coordinator: pool, idleWorkerLifetime: lifetime, now: { clock.now })
            try await ensuring {
                // The worker's pool is opened halfway through the reads' first lifetime, and other reads come at
                // its end and a second before the pool has been idle that long: it closes a lifetime after its use.
                clock.advance(lifetime / 2)
                let worker = try await reads.read(stored) { $0 }
                #expect(worker !== pool)
                let session: Int32 = try await worker.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
                func open() async throws -> Bool {
                    try await pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(session)").count == 1
                }
                for step in [lifetime / 2, lifetime / 2 - .seconds(1)] {
                    clock.advance(step)
                    #expect(try await reads.read(other) { $0 } === pool)
                    #expect(try await open(), "idle for less than its lifetime: the worker's pool stays open")
                }

                clock.advance(.seconds(1))
                // The next read, of any couple, closes the idle pool; its session ends.
                #expect(try await reads.read(other) { $0 } === pool)
                await #expect(throws: PostgresError.self) { try await worker.query("SELECT 1") }
                #expect(try await eventually(within: .seconds(10)) { try await !open() }, "the session ended")

                let again = try await reads.read(stored) { $0 }
                #expect(again !== worker && again !== pool)
                #expect(try await again.query("SELECT 1 AS one")[0].decode("one", as: Int32.self) == 1)
            } finally: {
                await reads.close()
            }
        }
    }

    /// `items` items of 100.00, each with two expenses of 10.00 allocated to it, and a received gift.
    static func seed(_ pool: PostgresConnectionPool, couple: UUID, scenario: UUID, items: Int) async throws {
        try await pool.query(
            """
            WITH i AS (
                INSERT INTO budget_items (couple_id, scenario_id, name, budgeted)
                SELECT \(couple), \(scenario), 'item ' || n, 100 FROM generate_series(1, \(items)) n RETURNING id
            ), e AS (
                INSERT INTO expenses (couple_id, name, amount)
                SELECT \(couple), 'expense ' || n, 10 FROM generate_series(1, 2 * \(items)) n RETURNING id
            ), paired AS (
                SELECT i.id AS item, e.id AS expense
                FROM (SELECT id, row_number() OVER () AS n FROM i) i
                JOIN (SELECT id, row_number() OVER () AS n FROM e) e ON (e.n + 1) / 2 = i.n
            ), a AS (
                INSERT INTO expense_allocations (couple_id, scenario_id, expense_id, budget_item_id, amount)
                SELECT \(couple), \(scenario), expense, item, 10 FROM paired
            )
            INSERT INTO gifts_and_owed (couple_id, from_name, amount, received, budget_item_id)
            SELECT \(couple), 'friend', 5, true, id FROM i
            """)
    }

    @Test("concurrent recalculations for one couple, from separate actors, end as if run one by one", arguments: 0..<10)
    func concurrentRecalculations(round: Int) async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 6) { pool in
            let world = try await BudgetWorld(pool)
            let setup = world.budget()
            let admin = Actor.operator(label: "t")
            let scenario = try await setup.createScenario(named: "Main", as: admin)
            var items: [UUID] = []
            for index in 0..<3 {
                items.append(
                    try await setup.createItem(named: "i\(index)", scenario: scenario.id, budgeted: 100, as: admin).id)
            }
            var expenses: [Expense] = []
            for index in 0..<4 {
                let expense = try await setup.createExpense(
                    named: "e\(index)", amount: money("100.0\(index)"), as: admin)
                _ = try await setup.allocate(expense: expense.id, scenario: scenario.id, items: items, as: admin)
                expenses.append(expense)
            }
            // At once, through three actors (as three processes would have), on connections opened beforehand so
            // that they really overlap: each expense is re-split over the items by budget, and given a new amount.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<6 { group.addTask { try await pool.query("SELECT pg_sleep(0.02)") } }
                try await group.waitForAll()
            }
            let actors = [world.budget(), world.budget(), world.budget()]
            _ = try await race(2 * expenses.count) { [items, expenses] index, go in
                let expense = expenses[index / 2]
                await go()
                if index.isMultiple(of: 2) {
                    _ = try await actors[index / 2 % 3].allocate(
                        expense: expense.id, scenario: scenario.id, items: items, as: admin)
                } else {
                    _ = try await actors[(index / 2 + 1) % 3].setAmount(
                        expense: expense.id, to: Decimal(Int.random(in: 1...100_000)) / 100, as: admin)
                }
            }
            // In either order, each expense ends wholly allocated at its final amount.
            let amounts = Dictionary(
                uniqueKeysWithValues: try await setup.expenses(as: admin).map { ($0.id, $0.amount) })
            let overview = try await setup.overview(scenario: scenario.id, as: admin)
            for expense in expenses {
                let allocated = overview.items.flatMap(\.expenses).filter { $0.expenseID == expense.id }
                #expect(allocated.count == items.count)
                #expect(allocated.reduce(0) { $0 + $1.allocated } == amounts[expense.id], "expense \(expense.name)")
            }
            #expect(overview.totals.spent == amounts.values.reduce(0, +))
        }
    }

    @Test("two edits of different fields of one expense, at once from separate actors, both land", arguments: 0..<10)
    func concurrentEdits(round: Int) async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 6) { pool in
            let world = try await BudgetWorld(pool)
            let admin = Actor.operator(label: "t")
            let expense = try await world.budget().createExpense(named: "Hall", amount: 100, as: admin)
            // Connections opened beforehand, so that the two edits really overlap.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 { group.addTask { try await pool.query("SELECT pg_sleep(0.02)") } }
                try await group.waitForAll()
            }
            let (one, other) = (world.budget(), world.budget())
            for attempt in 0..<10 {
                _ = try await race(2) { index, go in
                    await go()
                    _ =
                        index == 0
                        ? try await one.editExpense(expense.id, ExpenseEdit(vendor: "v\(attempt)"), as: admin)
                        : try await other.editExpense(expense.id, ExpenseEdit(category: "c\(attempt)"), as: admin)
                }
                let stored = try #require(try await world.budget().expenses(as: admin).first)
                #expect(stored.vendor == "v\(attempt)" && stored.category == "c\(attempt)", "attempt \(attempt)")
            }
        }
    }

    @Test("primary scenarios chosen at once, from separate actors, all land; the couple keeps one primary")
    func primaryScenarioRace() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 6) { pool in
            let world = try await BudgetWorld(pool)
            let admin = Actor.operator(label: "t")
            let existing = try await world.budget().createScenario(named: "Main", as: admin)
            let (one, other) = (world.budget(), world.budget())
            for attempt in 0..<20 {
                let outcomes = try await race(2) { index, go in
                    try await Outcome.of {
                        await go()
                        _ =
                            index == 0
                            ? try await one.createScenario(named: "New \(attempt)", primary: true, as: admin)
                            : try await other.setPrimaryScenario(existing.id, as: admin)
                    }
                }
                #expect(outcomes == [.success, .success], "attempt \(attempt)")
                let primaries = try await world.budget().scenarios(as: admin).filter(\.isPrimary).map(\.name)
                let chosen = ["Main", "New \(attempt)"]
                #expect(primaries.count == 1 && chosen.contains(primaries[0]), "attempt \(attempt): \(primaries)")
            }
        }
    }

    @Test("two items added at once, from separate actors, with room for one: one lands, the other is refused")
    func itemLimitRace() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 6) { pool in
            let world = try await BudgetWorld(pool)
            let admin = Actor.operator(label: "t")
            let scenario = try await world.budget().createScenario(named: "Main", as: admin)
            let (one, other) = (world.budget(), world.budget())
            for held in 0..<20 {
                // Room for exactly one more item.
                try await pool.query(
                    "UPDATE budget_row_limits SET max_rows = \(held + 1) WHERE table_name = 'budget_items'")
                let outcomes = try await race(2) { index, go in
                    try await Outcome.of {
                        await go()
                        _ = try await [one, other][index].createItem(
                            named: "\(index)-\(held)", scenario: scenario.id, budgeted: 1, as: admin)
                    }
                }
                #expect(Set(outcomes) == [.success, .refused("quota_exceeded")], "round \(held): \(outcomes)")
                let stored = try await pool.count("SELECT count(*) FROM budget_items WHERE couple_id = \(world.couple)")
                #expect(stored == held + 1, "round \(held)")
            }
            let refused = try await Outcome.of {
                _ = try await world.budget().cloneScenario(scenario.id, named: "Copy", as: admin)
            }
            #expect(refused == .refused("quota_exceeded"), "a clone would double the items")
            #expect(try await world.budget().scenarios(as: admin).count == 1, "and leaves nothing behind")
        }
    }

    @Test("clones and deletes for one couple at once, from separate actors, all land, none deadlocked, counts exact")
    func cloneWhileDeleting() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let admin = Actor.operator(label: "t")
            let scenario = try await world.budget().createScenario(named: "Main", as: admin)
            try await Self.seed(pool, couple: world.couple, scenario: scenario.id, items: 20)
            let items: [UUID] = try await pool.query(
                "SELECT id FROM budget_items WHERE couple_id = \(world.couple) ORDER BY name"
            ).map { try $0.decode("id") }
            // A deadlock would wait, not be broken and retried, until lock_timeout refused a statement.
            let database: String = try await pool.query("SELECT current_database() AS name")[0].decode("name")
            try await pool.query("ALTER DATABASE \(identifier: database) SET deadlock_timeout = '1h'")
            try await pool.query("ALTER DATABASE \(identifier: database) SET lock_timeout = '5s'")
            let racers = PostgresConnectionPool(configuration: pool.configuration, maxConnections: 4)
            let budget = {
                CoupleBudget(
                    couple: world.couple, repository: PostgresBudgetRepository(pool: racers),
                    checker: PermissionChecker(repository: PostgresCollaborationRepository(pool: racers)))
            }
            let (one, other) = (budget(), budget())
            for (round, item) in items.enumerated() {
                let outcomes = try await race(2) { index, go in
                    try await Outcome.of {
                        await go()
                        if index == 0 {
                            _ = try await one.cloneScenario(scenario.id, named: "Copy \(round)", as: admin)
                        } else {
                            _ = try await other.delete(.item, id: item, as: admin)
                        }
                    }
                }
                #expect(outcomes == [.success, .success], "round \(round): \(outcomes)")
            }
            await racers.close()
            let miscounted = try await pool.count(
                """
                SELECT count(*) FROM (VALUES
                    ('budget_scenarios', (SELECT count(*) FROM budget_scenarios WHERE couple_id = \(world.couple))),
                    ('budget_items', (SELECT count(*) FROM budget_items WHERE couple_id = \(world.couple))),
                    ('expense_allocations', (SELECT count(*) FROM expense_allocations WHERE couple_id = \(world.couple)))
                ) AS actual (table_name, n)
                WHERE n <> coalesce((SELECT row_count FROM budget_row_counts c
                                     WHERE c.couple_id = \(world.couple) AND c.table_name = actual.table_name), 0)
                """)
            #expect(miscounted == 0, "the counts match the rows")
        }
    }

    @Test("a page of any listing holds the couple's own rows only; a page after another couple's row is refused")
    func pagesStayInTheCouple() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let admin = Actor.operator(label: "t")
            let other = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
            var mine: (scenario: UUID, expense: UUID)?
            for couple in [other, world.couple] {
                let b = CoupleBudget(
                    couple: couple, repository: world.repository,
                    checker: PermissionChecker(repository: PostgresCollaborationRepository(pool: pool)))
                let scenario = try await b.createScenario(named: "Main", as: admin).id
                _ = try await b.createFolder(named: "Party", scenario: scenario, as: admin)
                _ = try await b.createItem(named: "Hall", scenario: scenario, budgeted: 10, as: admin)
                let expense = try await b.createExpense(named: "Deposit", amount: 10, as: admin).id
                _ = try await b.recordPayment(expense: expense, amount: 1, as: admin)
                _ = try await b.recordGift(from: "Aunt", amount: 1, received: true, as: admin)
                mine = (scenario, expense)
            }
            let (scenario, expense) = try #require(mine)
            let b = world.budget()
            let theirs = try #require(
                try await pool.query(
                    "SELECT id FROM expenses WHERE couple_id = \(other)"
                ).first?.decode("id", as: UUID.self))
            let refused = try await Outcome.of {
                _ = try await b.expenses(page: PageRequest(limit: 10, after: PageCursor(id: theirs)), as: admin)
            }
            #expect(refused == .refused("not_found"), "the other couple's expense is no row of this listing")
            do {
                /// A page as long as the listing, of any listing.
                func page<Key>() -> PageRequest<Key> { PageRequest(limit: 1000, after: nil) }
                #expect(try await b.scenarios(page: page(), as: admin) == b.scenarios(as: admin))
                #expect(
                    try await b.folders(scenario: scenario, page: page(), as: admin)
                        == b.folders(scenario: scenario, as: admin))
                #expect(
                    try await b.items(scenario: scenario, page: page(), as: admin)
                        == b.items(scenario: scenario, as: admin))
                #expect(try await b.expenses(page: page(), as: admin) == b.expenses(as: admin))
                #expect(
                    try await b.payments(expense: expense, page: page(), as: admin)
                        == b.payments(expense: expense, as: admin))
                #expect(try await b.paymentStatuses(page: page(), as: admin) == b.paymentStatuses(as: admin))
                #expect(try await b.gifts(page: page(), as: admin) == b.gifts(as: admin))
                #expect(try await b.expenses(page: page(), as: admin).count == 1)
            }
        }
    }

    @Test("an overview snapshot holds what the five reads return, from one REPEATABLE READ transaction")
    func overviewSnapshot() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let world = try await BudgetWorld(pool)
            let scenario = try await world.budget().createScenario(named: "Main", as: Actor.operator(label: "t"))
            try await Self.seed(pool, couple: world.couple, scenario: scenario.id, items: 10)
            let repository = world.repository
            let snapshot = try await repository.overviewSnapshot(couple: world.couple, scenario: scenario.id)
            let (revision, exists) = try await repository.revision(couple: world.couple, scenario: scenario.id)
            #expect(snapshot.revision == revision && snapshot.scenarioExists == exists && exists)
            #expect(
                snapshot.items == (try await repository.items(couple: world.couple, scenario: scenario.id, page: nil)))
            #expect(
                snapshot.allocations
                    == (try await repository.allocationCents(couple: world.couple, scenario: scenario.id)))
            #expect(snapshot.expenseNames == (try await repository.expenseNames(couple: world.couple)))
            #expect(snapshot.gifts == (try await repository.linkedGifts(couple: world.couple, scenario: scenario.id)))
            #expect((snapshot.items.count, snapshot.allocations.joined().count, snapshot.gifts.count) == (10, 20, 10))
            // Two halves by item id, each holding all of its items' allocations; together in (item, expense) order.
            #expect(snapshot.allocations.count == 2)
            for (half, allocations) in snapshot.allocations.enumerated() {
                #expect(allocations.allSatisfy { ($0.budgetItemID.uuid.0 >= 0x80) == (half == 1) })
            }
            let all = Array(snapshot.allocations.joined())
            #expect(
                zip(all, all.dropFirst()).allSatisfy {
                    ($0.budgetItemID, $0.expenseID) < ($1.budgetItemID, $1.expenseID)
                })
            let elsewhere = try await repository.overviewSnapshot(couple: world.couple, scenario: UUID())
            #expect(!elsewhere.scenarioExists && elsewhere.items.isEmpty && elsewhere.allocations.joined().isEmpty)
        }
    }

    @Test("overviews taken while writes keep landing all answer, each with one state: names and allocations agree")
    func overviewDuringWrites() async throws {
        try await TestDatabase.withFreshPool(from: .migrated, maxConnections: 8) { pool in
            let world = try await BudgetWorld(pool)
            let admin = Actor.operator(label: "t")
            let scenario = try await world.budget().createScenario(named: "Main", as: admin)
            try await Self.seed(pool, couple: world.couple, scenario: scenario.id, items: 10)
            let expense: UUID = try await pool.query(
                "SELECT id FROM expenses WHERE couple_id = \(world.couple) AND name = 'expense 1'")[0].decode("id")
            try await pool.query(
                "UPDATE expenses SET name = 'v1000' WHERE couple_id = \(world.couple) AND id = \(expense)")
            let budget = world.budget()
            // Each write renames the expense after the cents it then allocates, in one transaction; so in any one
            // state of the database the link's name is "v" followed by its allocated cents. Writes go on without
            // pause until the overviews are done.
            let overviewsDone = Flag()
            let writes = try await race(2) { index, go in
                await go()
                if index == 0 {
                    var cents = 0
                    while !overviewsDone.isSet && !Task.isCancelled {
                        cents = cents % 99_999 + 1
                        try await pool.withTransaction { connection in
                            try await connection.query(
                                """
                                UPDATE expenses SET name = \("v\(cents)"), amount = \(cents) / 100.0
                                WHERE couple_id = \(world.couple) AND id = \(expense)
                                """)
                            try await connection.query(
                                """
                                UPDATE expense_allocations SET amount = \(cents) / 100.0
                                WHERE couple_id = \(world.couple) AND expense_id = \(expense)
                                """)
                        }
                    }
                    return cents
                }
                for _ in 0..<30 {
                    let overview = try await budget.overview(scenario: scenario.id, as: admin)
                    let link = try #require(overview.items.flatMap(\.expenses).first { $0.expenseID == expense })
                    let cents = NSDecimalNumber(decimal: link.allocated * 100).intValue
                    #expect(link.name == "v\(cents)", "one overview mixed two states")
                    // The fallback's snapshot, taken directly: one state too, however the writes fall.
                    let snapshot = try await world.repository.overviewSnapshot(
                        couple: world.couple, scenario: scenario.id)
                    let allocated = try #require(snapshot.allocations.joined().first { $0.expenseID == expense }).cents
                    #expect(snapshot.expenseNames[expense] == "v\(allocated)", "one snapshot mixed two states")
                }
                overviewsDone.set()
                return 0
            }[0]
            // Once the writes are over, the overview shows the last one.
            let last = try await budget.overview(scenario: scenario.id, as: admin)
            #expect(last.items.flatMap(\.expenses).contains { $0.expenseID == expense && $0.name == "v\(writes)" })
        }
    }
}
