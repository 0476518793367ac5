// The budget overview benchmark (issue 7): `CoupleBudget.overview` for a couple with 1,000 budget items,
// 10,000 expenses and 20,000 allocations, and for one with four times that, each against a naive per-item
// query loop (the N+1 pattern the seeds warn about) on the same data, in one run; then a full registry of
// per-couple actors. Run it with scripts/bench-budget, which builds it in release mode and points it at a
// disposable, migrated database.
//
//   BudgetBenchmark [ROUNDS]        (default 20; connection from PGHOST, PGPORT, PGDATABASE, ...)
//   BudgetBenchmark overview [ROUNDS]
//
// `overview` seeds the 1x couple alone and times only the service's overview, read where the couple's budget is
// stored and, alternating, through the server connected to (scripts/bench-scale compares a Citus cluster with
// plain PostgreSQL with it).

import Budget
import Collaboration
import Foundation
import Postgres
import Storage

let overviewOnly = CommandLine.arguments.dropFirst().first == "overview"
let rounds = CommandLine.arguments.dropFirst(overviewOnly ? 2 : 1).first.flatMap(Int.init) ?? 20
guard rounds > 0 else {
    FileHandle.standardError.write(Data("usage: BudgetBenchmark [overview] [ROUNDS]\n".utf8))
    exit(2)
}

let pool = PostgresConnectionPool(
    configuration: PostgresConfiguration(applicationName: "budget-benchmark"), maxConnections: 8)
// Each couple's budget read where it is stored, as `rbac serve --budget-reads-on-workers` does: on a Citus
// worker, or (plain PostgreSQL) the one server; `relaying` reads through the pool's server (on Citus, the
// coordinator).
let repository = PostgresBudgetRepository(pool: pool, reads: BudgetReadPools(coordinator: pool))
let relaying = PostgresBudgetRepository(pool: pool)
let checker = PermissionChecker(repository: PostgresCollaborationRepository(pool: pool))
let admin = Actor.operator(label: "benchmark")

/// One couple's budget at `scale`: 1,000 × scale items (half with a gift, half of those received),
/// 10,000 × scale expenses, each split over two items (20,000 × scale allocations); all in one scenario.
/// Returns the couple and the scenario.
func seed(scale: Int) async throws -> (couple: UUID, scenario: UUID) {
    let items = 1_000 * scale
    let expenses = 10_000 * scale
    return try await pool.withTransaction { connection in
        let couple: UUID = try await connection.query(
            "INSERT INTO couples (name) VALUES (\("budget benchmark \(scale)x")) RETURNING id")[0].decode("id")
        let scenario: UUID = try await connection.query(
            "INSERT INTO budget_scenarios (couple_id, name, is_primary) VALUES (\(couple), 'Main', true) RETURNING id"
        )[0].decode("id")
        try await connection.query(
            """
            INSERT INTO budget_items (couple_id, id, scenario_id, name, category, event, budgeted)
            SELECT \(couple), md5(\(couple)::text || 'i' || n)::uuid, \(scenario), 'item ' || n, 'category ' || n % 20,
                   'event ' || n % 5, 100 + n % 900
            FROM generate_series(1, \(items)) AS n
            """)
        try await connection.query(
            """
            INSERT INTO expenses (couple_id, id, name, vendor, amount, category)
            SELECT \(couple), md5(\(couple)::text || 'e' || n)::uuid, 'expense ' || n, 'vendor ' || n % 300,
                   (n * 7919 % 100000) / 100.0 + 1, 'category ' || n % 20
            FROM generate_series(1, \(expenses)) AS n
            """)
        // Expense n: two thirds to item n mod I, one third to the item half the list away.
        try await connection.query(
            """
            INSERT INTO expense_allocations (couple_id, scenario_id, expense_id, budget_item_id, amount)
            SELECT \(couple), \(scenario), e.id, md5(\(couple)::text || 'i' || (s.item + 1))::uuid, s.amount
            FROM generate_series(1, \(expenses)) AS n
            JOIN expenses e ON e.couple_id = \(couple) AND e.id = md5(\(couple)::text || 'e' || n)::uuid
            CROSS JOIN LATERAL (VALUES
                (n % \(items), e.amount - round(e.amount / 3, 2)),
                ((n + \(items) / 2) % \(items), round(e.amount / 3, 2))) AS s(item, amount)
            """)
        try await connection.query(
            """
            INSERT INTO gifts_and_owed (couple_id, from_name, amount, received, budget_item_id)
            SELECT \(couple), 'guest ' || n, 50 + n % 100, n % 4 = 0, md5(\(couple)::text || 'i' || n)::uuid
            FROM generate_series(2, \(items), 2) AS n
            """)
        return (couple, scenario)
    }
}

/// Vacuums and analyzes until every page of the tables the overview reads is marked all-visible, as
/// autovacuum leaves a live server's settled data, so that index-only scans need no visit to the table. A
/// VACUUM cannot mark the newest pages while another session holds an older snapshot (autovacuum analyzing
/// what was just seeded, say), so it tries again for up to a minute.
func settle() async throws {
    for _ in 0..<120 {
        // The tables by name: on Citus, so that the vacuum reaches their shards on the workers.
        try await pool.query(
            "VACUUM (ANALYZE) budget_scenarios, budget_items, expenses, expense_allocations, gifts_and_owed")
        let settled: Bool = try await pool.query(
            """
            SELECT bool_and(relallvisible >= relpages) AS settled FROM pg_class
            WHERE relname IN ('budget_items', 'expenses', 'expense_allocations', 'gifts_and_owed')
            """)[0].decode("settled")
        if settled { return }
        try await Task.sleep(for: .milliseconds(500))
    }
    FileHandle.standardError.write(Data("BudgetBenchmark: VACUUM left pages not all-visible for a minute\n".utf8))
    exit(1)
}

/// The service's overview, from an actor with no cached overview: the revision, the permission check (the
/// operator's is free) and four reads in parallel.
func overview(_ couple: UUID, _ scenario: UUID, from repository: PostgresBudgetRepository = repository)
    async throws -> BudgetOverview
{
    try await CoupleBudget(couple: couple, repository: repository, checker: checker)
        .overview(scenario: scenario, as: admin)
}

/// The naive way, the N+1 pattern the seeds warn about: the items, then for each item its allocations (with
/// their expenses' names) and its gifts, two prepared statements per item; the same arithmetic afterwards.
func naiveOverview(_ couple: UUID, _ scenario: UUID) async throws -> BudgetOverview {
    let (revision, _) = try await repository.revision(couple: couple, scenario: scenario)
    let items = try await repository.items(couple: couple, scenario: scenario, page: nil)
    var allocations: [AllocationCents] = []
    var expenseNames: [UUID: String] = [:]
    var gifts: [Gift] = []
    for item in items {
        for row in try await pool.query(
            PostgresQuery(
                """
                SELECT a.expense_id, a.amount, e.name
                FROM expense_allocations a JOIN expenses e ON e.couple_id = a.couple_id AND e.id = a.expense_id
                WHERE a.couple_id = \(couple) AND a.scenario_id = \(scenario) AND a.budget_item_id = \(item.id)
                """
            ).prepared(as: "naive_item_allocations"))
        {
            let expense: UUID = try row.decode("expense_id")
            allocations.append(
                AllocationCents(
                    expenseID: expense, budgetItemID: item.id,
                    cents: try row.decode("amount", as: Hundredths.self).value))
            expenseNames[expense] = try row.decode("name")
        }
        for row in try await pool.query(
            PostgresQuery(
                """
                SELECT id, from_name, amount, received FROM gifts_and_owed
                WHERE couple_id = \(couple) AND budget_item_id = \(item.id)
                """
            ).prepared(as: "naive_item_gifts"))
        {
            gifts.append(
                Gift(
                    id: try row.decode("id"), from: try row.decode("from_name"), amount: try row.decode("amount"),
                    received: try row.decode("received"), budgetItemID: item.id))
        }
    }
    return await BudgetRules.overview(
        scenario: scenario, revision: revision, items: items, allocations: [allocations], expenseNames: expenseNames,
        gifts: gifts)
}

/// The time of `body` in milliseconds.
func milliseconds<Value>(_ body: () async throws -> Value) async throws -> Double {
    let elapsed = try await ContinuousClock().measure { _ = try await body() }
    return Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
}

/// The time of `body` in microseconds, divided by `count`.
func microseconds(per count: Int, _ body: () async throws -> Void) async throws -> Double {
    try await milliseconds(body) * 1e3 / Double(count)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Both ways must give the same overview, links in any order.
func sameOverview(_ a: BudgetOverview, _ b: BudgetOverview) -> Bool {
    func normalised(_ overview: BudgetOverview) -> [String] {
        overview.items.map { line in
            "\(line.item.id) \(line.spent) \(line.gifts) \(line.remaining) "
                + line.expenses.map { "\($0.expenseID):\($0.name):\($0.allocated)" }.sorted().joined(separator: ",")
                + " " + line.giftLinks.map { "\($0.giftID)" }.sorted().joined(separator: ",")
        }
    }
    return a.totals == b.totals && normalised(a) == normalised(b)
}

if overviewOnly {
    do {
        FileHandle.standardError.write(Data("seeding a 1x couple ...\n".utf8))
        let small = try await seed(scale: 1)
        try await settle()
        let first = try await overview(small.couple, small.scenario)
        guard first.items.count == 1_000, first.items.reduce(0, { $0 + $1.expenses.count }) == 20_000 else {
            FileHandle.standardError.write(Data("BudgetBenchmark: the overview is not the seeded budget\n".utf8))
            exit(1)
        }
        var (times, relayed): ([Double], [Double]) = ([], [])
        for _ in 0..<rounds {
            times.append(try await milliseconds { try await overview(small.couple, small.scenario) })
            relayed.append(
                try await milliseconds { try await overview(small.couple, small.scenario, from: relaying) })
        }
        print(
            String(
                format:
                    "overview 1x: %.2f ms (median of %d rounds, min %.2f); read through the server connected to: %.2f ms",
                median(times), rounds, times.min()!, median(relayed)))
        await pool.close()
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("BudgetBenchmark: \(error)\n".utf8))
        exit(1)
    }
}

do {
    FileHandle.standardError.write(Data("seeding 1x and 4x couples ...\n".utf8))
    let small = try await seed(scale: 1)
    let large = try await seed(scale: 4)
    try await settle()

    for (couple, scenario, items) in [(small.couple, small.scenario, 1_000), (large.couple, large.scenario, 4_000)] {
        let fast = try await overview(couple, scenario)
        let naive = try await naiveOverview(couple, scenario)
        guard fast.items.count == items, fast.items.reduce(0, { $0 + $1.expenses.count }) == 20 * items,
            sameOverview(fast, naive)
        else {
            FileHandle.standardError.write(Data("BudgetBenchmark: the two overviews differ\n".utf8))
            exit(1)
        }
    }

    // Alternating, so that drift on a noisy machine hits every measurement alike.
    FileHandle.standardError.write(Data("\(rounds) rounds ...\n".utf8))
    var overview1x: [Double] = []
    var naive1x: [Double] = []
    var overview4x: [Double] = []
    var naive4x: [Double] = []
    for _ in 0..<rounds {
        overview1x.append(try await milliseconds { try await overview(small.couple, small.scenario) })
        naive1x.append(try await milliseconds { try await naiveOverview(small.couple, small.scenario) })
        overview4x.append(try await milliseconds { try await overview(large.couple, large.scenario) })
        naive4x.append(try await milliseconds { try await naiveOverview(large.couple, large.scenario) })
    }
    func report(_ label: String, _ times: [Double], _ note: String) {
        let figures = String(format: "%9.2f ms (min %.2f)", median(times), times.min()!)
        print("\(label.padding(toLength: 46, withPad: " ", startingAt: 0)) \(figures)   \(note)")
    }
    let (one, four) = (median(overview1x), median(overview4x))
    report("overview, 1x: 1,000 items, 10,000 expenses,", overview1x, "goal < 50 ms")
    print("              20,000 allocations")
    report("overview, 4x", overview4x, String(format: "%.2f x the 1x time (goal <= 4.5)", four / one))
    report(
        "naive per-item loop, 1x", naive1x, String(format: "overview %.1f x faster (goal >= 20)", median(naive1x) / one)
    )
    report("naive per-item loop, 4x", naive4x, String(format: "overview %.1f x faster", median(naive4x) / four))
    print("medians of \(rounds) rounds; statements: overview 7, naive loop 2 + 2 per item")

    // The registry of per-couple actors when full, as under traffic from more couples than it holds: each
    // request of a couple it does not hold drops the least recently used idle actor under the lock that every
    // budget request takes. Against requests of couples it holds, each round on a registry filled anew.
    let capacity = 10_000
    var (holding, dropping): ([Double], [Double]) = ([], [])
    for _ in 0..<rounds {
        let registry = BudgetRegistry(capacity: capacity) {
            CoupleBudget(couple: $0, repository: repository, checker: checker)
        }
        let couples = (0..<capacity).map { _ in UUID() }
        for couple in couples { _ = try await registry.with(couple) { _ in 0 } }
        holding.append(
            try await microseconds(per: capacity) {
                for couple in couples { _ = try await registry.with(couple) { _ in 0 } }
            })
        let newcomers = (0..<capacity).map { _ in UUID() }
        dropping.append(
            try await microseconds(per: capacity) {
                for couple in newcomers { _ = try await registry.with(couple) { _ in 0 } }
            })
    }
    print(
        String(
            format:
                "registry of %d actors, full: a request of a couple it holds %.2f µs, of one it drops another for %.2f µs (%.1f x)",
            capacity, median(holding), median(dropping), median(dropping) / median(holding)))
    await pool.close()
} catch {
    FileHandle.standardError.write(Data("BudgetBenchmark: \(error)\n".utf8))
    exit(1)
}
