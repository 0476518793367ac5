import Budget
import Collaboration
import Foundation
import Postgres
import TestSupport
import Testing

@testable import Storage

/// On Citus the collaboration core stays on the coordinator, and each couple's budget and audit log on the worker
/// holding its shards (decision 0009): a worker that goes down takes its couples' budgets and membership changes
/// with it, and nothing else.
@Suite(
    "A Citus worker down",
    .enabled(if: !TestDatabase.citusWorkers.isEmpty, "needs the Citus cluster of scripts/citus-cluster"))
struct CitusWorkerDownTests {
    static let admin = Actor.operator(label: "t")

    @Test(
        "every couple's checks are answered; the worker's couples' changes are refused as unavailable, changing nothing"
    )
    func workerDown() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            let memberships = MembershipService(repository: repository)
            let checker = PermissionChecker(repository: repository)
            let budgets = PostgresBudgetRepository(pool: pool)
            func budget(_ couple: UUID) -> CoupleBudget {
                CoupleBudget(couple: couple, repository: budgets, checker: checker)
            }
            // A couple with a planner and a scenario on each worker.
            let (down, up) = try await TestDatabase.onEachWorker(pool) { pool in
                let planner = try await pool.newUser()
                let couple = try await pool.newCouple(members: [
                    (try await pool.newUser(), "owner"), (planner, "planner"),
                ])
                let scenario = try await budget(couple).createScenario(named: "Main", primary: true, as: Self.admin)
                return (couple, (couple: couple, planner: planner, scenario: scenario.id))
            }
            func state(_ couple: UUID) async throws -> [String] {
                try await pool.query(
                    """
                    SELECT concat_ws(' ', c.revision, m.user_id, m.role, m.status,
                                     (SELECT count(*) FROM outbox WHERE payload ->> 'couple_id' = c.id::text)) AS row
                    FROM couples c JOIN memberships m ON m.couple_id = c.id WHERE c.id = \(couple) ORDER BY m.user_id
                    """
                ).map { try $0.decode("row") }
            }
            let viewer = RoleName(rawValue: "viewer")!
            let downBefore = try await state(down.couple)
            try await TestDatabase.withFirstWorkerDown(pool) { _ in
                for couple in [down, up] {
                    let check = try await checker.check(
                        couple: couple.couple, user: couple.planner, permission: Permission(rawValue: "budget.edit")!)
                    #expect(check.allowed, "answered on the coordinator, whichever worker holds the couple")
                }
                // Unavailable: a 503 over HTTP, exit 5 in the CLI.
                let refusals: [(any CodedError)?] = [
                    await expectBudgetRefusal(.unavailable) {
                        _ = try await budget(down.couple).overview(scenario: down.scenario, as: Self.admin)
                    },
                    await expectBudgetRefusal(.unavailable) {
                        _ = try await budget(down.couple).createItem(
                            named: "Venue", scenario: down.scenario, budgeted: 100, as: Self.admin)
                    },
                    await expectRefusal(.unavailable) {
                        _ = try await memberships.grant(viewer, to: down.planner, in: down.couple, as: Self.admin)
                    },
                ]
                // The worker's address, in the server's words, is for the operator's log alone.
                #expect(
                    refusals.allSatisfy {
                        $0?.message == "cannot reach part of the database" && $0?.detail?.isEmpty == false
                    }, "\(refusals)")
                #expect(try await state(down.couple) == downBefore, "the refused grant changed nothing")
                #expect(try await budget(up.couple).overview(scenario: up.scenario, as: Self.admin).items.isEmpty)
                _ = try await memberships.grant(viewer, to: up.planner, in: up.couple, as: Self.admin)
            }
            _ = try await memberships.grant(viewer, to: down.planner, in: down.couple, as: Self.admin)
            _ = try await budget(down.couple).createItem(
                named: "Venue", scenario: down.scenario, budgeted: 100, as: Self.admin)
            let overview = try await budget(down.couple).overview(scenario: down.scenario, as: Self.admin)
            #expect(overview.items.map(\.item.name) == ["Venue"])
        }
    }

    @Test("a sweep records the expiries of every couple but the down worker's, and theirs once it is back")
    func sweepWithWorkerDown() async throws {
        try await TestDatabase.withFreshPool(from: .migrated) { pool in
            let repository = PostgresCollaborationRepository(pool: pool)
            // On each worker, a couple whose two viewers' access ended: the down worker's first.
            let (down, up) = try await TestDatabase.onEachWorker(pool) { pool in
                let couple = try await pool.newCouple(members: [
                    (try await pool.newUser(), "owner"), (try await pool.newUser(), "viewer"),
                    (try await pool.newUser(), "viewer"),
                ])
                return (couple, couple)
            }
            try await pool.query(
                """
                UPDATE memberships
                SET expires_at = now()
                    - CASE couple_id WHEN \(down) THEN interval '2 minutes' ELSE interval '1 minute' END
                WHERE couple_id IN (\(down), \(up)) AND role = 'viewer'
                """)
            func recorded() async throws -> Set<UUID> {
                Set(try await pool.query("SELECT couple_id FROM expiries_recorded").map { try $0.decode("couple_id") })
            }
            func logged(_ couple: UUID) async throws -> Int {
                try await pool.query(
                    """
                    SELECT count(*)::int AS n FROM audit_log
                    WHERE couple_id = \(couple) AND action = 'membership.expired'
                    """)[0].decode("n")
            }
            try await TestDatabase.withFirstWorkerDown(pool) { (node: String) async throws in
                // The down couple's first expiry finds its worker away, its second is skipped: both counted,
                // neither counted against the limit.
                #expect(
                    try await repository.sweepExpired(limit: 2)
                        == ExpirySweep(memberships: 2, invitations: 0, unreached: 2, unreachedWorkers: [node]),
                    "the up worker's couple's, the down one's left")
                #expect(try await recorded() == [up])
                #expect(
                    try await repository.sweepExpired()
                        == ExpirySweep(memberships: 0, invitations: 0, unreached: 2, unreachedWorkers: [node]),
                    "the down one's still wait")
            }
            #expect(
                try await repository.sweepExpired()
                    == ExpirySweep(memberships: 2, invitations: 0, unreached: 0, unreachedWorkers: []),
                "the down worker's couple's, now")
            #expect(try await recorded() == [up, down])
            #expect(try await logged(down) == 2)
            #expect(try await logged(up) == 2)
        }
    }
}
