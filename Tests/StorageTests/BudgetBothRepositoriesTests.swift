import Budget
import Collaboration
import Foundation
import InMemoryRepositories
import Storage
import TestSupport
import Testing

/// Budget rules that the schema's keys enforce in PostgreSQL and the in-memory repository must enforce alike:
/// what goes with a deleted record and what stays, and where an item may be filed.
@Suite("Budget records on both repositories")
struct BudgetBothRepositoriesTests {
    static let admin = Actor.operator(label: "tests")

    /// A couple's budget on the given backend, acted on by the operator (who needs no permission).
    static func withBudget(_ backend: Backend, _ body: (CoupleBudget) async throws -> Void) async throws {
        try await withBudget(backend) { budget, _, _ in try await body(budget) }
    }

    /// The same, with the repository under it and the couple.
    static func withBudget(
        _ backend: Backend, _ body: (CoupleBudget, any BudgetRepository, UUID) async throws -> Void
    ) async throws {
        switch backend {
        case .memory:
            let roles = try PolicyDocument.load(from: repositoryRoot.appendingPathComponent("policies/policy.json"))
                .flattened()
            let checker = PermissionChecker(repository: InMemoryCollaborationRepository(roles: roles))
            let (couple, repository) = (UUID(), InMemoryBudgetRepository())
            try await body(CoupleBudget(couple: couple, repository: repository, checker: checker), repository, couple)
        case .postgres:
            try await TestDatabase.withFreshPool(from: .migrated) { pool in
                let couple = try await pool.newCouple(members: [(try await pool.newUser(), "owner")])
                let checker = PermissionChecker(repository: PostgresCollaborationRepository(pool: pool))
                let repository = PostgresBudgetRepository(pool: pool)
                try await body(
                    CoupleBudget(couple: couple, repository: repository, checker: checker), repository, couple)
            }
        }
    }

    @Test("a write that changes nothing keeps the budget revision; a change moves it once", arguments: Backend.allCases)
    func unchangedWrites(backend: Backend) async throws {
        try await Self.withBudget(backend) { b, repository, couple in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let hall = try await b.createItem(named: "Hall", scenario: main.id, budgeted: 300, as: admin)
            let food = try await b.createItem(named: "Food", scenario: main.id, budgeted: 100, as: admin)
            let deposit = try await b.createExpense(named: "Deposit", amount: 100, as: admin)
            _ = try await b.allocate(expense: deposit.id, scenario: main.id, items: [hall.id, food.id], as: admin)
            func revision() async throws -> Int64 { try await repository.revision(couple: couple, scenario: main.id).0 }
            let before = try await revision()
            _ = try await b.editItem(hall.id, ItemEdit(name: "Hall"), as: admin)
            _ = try await b.setBudgeted(item: hall.id, to: 300, as: admin)
            _ = try await b.allocate(expense: deposit.id, scenario: main.id, items: [hall.id, food.id], as: admin)
            #expect(try await revision() == before, "the same name, budget and split: nothing changed")
            _ = try await b.editItem(hall.id, ItemEdit(name: "Great Hall"), as: admin)
            #expect(try await revision() == before + 1)
        }
    }

    @Test(
        "each kind goes with what depends on it; items and gifts let go; the primary scenario stays",
        arguments: Backend.allCases)
    func cascades(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let alt = try await b.createScenario(named: "Alt", as: admin)
            let folder = try await b.createFolder(named: "Venue", scenario: main.id, as: admin)
            let hall = try await b.createItem(
                named: "Hall", scenario: main.id, budgeted: 300, folder: folder.id, as: admin)
            let food = try await b.createItem(named: "Food", scenario: main.id, budgeted: 100, as: admin)
            let other = try await b.createItem(named: "Other", scenario: alt.id, budgeted: 100, as: admin)
            let deposit = try await b.createExpense(named: "Deposit", amount: 100, as: admin)
            let catering = try await b.createExpense(named: "Catering", amount: 50, as: admin)
            _ = try await b.allocate(expense: deposit.id, scenario: main.id, items: [hall.id, food.id], as: admin)
            _ = try await b.allocate(expense: deposit.id, scenario: alt.id, items: [other.id], as: admin)
            _ = try await b.allocate(expense: catering.id, scenario: main.id, items: [food.id], as: admin)
            _ = try await b.recordPayment(expense: deposit.id, amount: 40, as: admin)
            let aunt = try await b.recordGift(from: "Aunt", amount: 20, received: true, budgetItem: hall.id, as: admin)
            let uncle = try await b.recordGift(
                from: "Uncle", amount: 5, received: true, budgetItem: other.id, as: admin)

            // A folder: its item stays, in no folder.
            #expect(try await b.delete(.folder, id: folder.id, as: admin) == Deletion(deleted: .folder, id: folder.id))
            #expect(try await b.folders(scenario: main.id, as: admin).isEmpty)
            #expect(try await b.items(scenario: main.id, as: admin).first { $0.id == hall.id }?.folderID == nil)

            // An item: its allocations go, its gift stays, unlinked; the rest of the overview is untouched.
            _ = try await b.delete(.item, id: hall.id, as: admin)
            let overview = try await b.overview(scenario: main.id, as: admin)
            #expect(overview.items.map(\.item.id) == [food.id])
            #expect(overview.totals.spent == 75, "Food's share of the deposit (25), and the catering (50)")
            #expect(overview.totals.gifts == 0)
            #expect(try await b.gifts(as: admin).first { $0.id == aunt.id }?.budgetItemID == nil)

            // An expense: its payments and its allocations in every scenario go.
            _ = try await b.delete(.expense, id: deposit.id, as: admin)
            #expect(try await b.expenses(as: admin).map(\.id) == [catering.id])
            #expect(try await b.paymentStatuses(as: admin).map(\.expenseID) == [catering.id])
            #expect(try await b.overview(scenario: main.id, as: admin).totals.spent == 50)
            #expect(try await b.overview(scenario: alt.id, as: admin).totals.spent == 0)

            // A payment, and a gift.
            let payment = try await b.recordPayment(expense: catering.id, amount: 10, as: admin)
            _ = try await b.delete(.payment, id: payment.id, as: admin)
            #expect(try await b.paymentStatuses(as: admin).map(\.payments) == [0])
            _ = try await b.delete(.gift, id: uncle.id, as: admin)
            #expect(try await b.gifts(as: admin).map(\.id) == [aunt.id])

            // The primary scenario stays; another one goes with its items, and its gifts let go.
            let refused = await expectBudgetRefusal(.primaryScenario) {
                _ = try await b.delete(.scenario, id: main.id, as: admin)
            }
            #expect(refused?.message.contains("primary") == true)
            let uncleAgain = try await b.recordGift(
                from: "Uncle", amount: 5, received: false, budgetItem: other.id, as: admin)
            _ = try await b.delete(.scenario, id: alt.id, as: admin)
            #expect(try await b.scenarios(as: admin).map(\.id) == [main.id])
            #expect(try await b.gifts(as: admin).first { $0.id == uncleAgain.id }?.budgetItemID == nil)
            await expectBudgetRefusal(.notFound) {
                _ = try await b.overview(scenario: alt.id, as: admin)
            }

            // What is gone, or never was, is not found.
            for (record, id) in [
                (BudgetRecord.folder, folder.id), (.item, hall.id), (.item, other.id), (.expense, deposit.id),
                (.payment, payment.id), (.gift, uncle.id), (.scenario, alt.id), (.scenario, UUID()),
            ] {
                await expectBudgetRefusal(.notFound) { _ = try await b.delete(record, id: id, as: admin) }
            }
        }
    }

    @Test(
        "an item goes only in a folder of its scenario, a gift only against an item; a refusal names what is missing",
        arguments: Backend.allCases)
    func filing(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let alt = try await b.createScenario(named: "Alt", as: admin)
            let folder = try await b.createFolder(named: "Venue", scenario: main.id, as: admin)
            let misfiled: [(UUID, UUID?, BudgetRecord)] = [
                (alt.id, folder.id, .folder), (main.id, UUID(), .folder), (UUID(), nil, .scenario),
            ]
            for (scenario, folder, missing) in misfiled {
                let refusal = await expectBudgetRefusal(.notFound) {
                    _ = try await b.createItem(
                        named: "Hall", scenario: scenario, budgeted: 1, folder: folder, as: admin)
                }
                #expect(refusal?.message == missing.notFound.message)
            }
            #expect(try await b.items(scenario: main.id, as: admin).isEmpty)
            #expect(try await b.items(scenario: alt.id, as: admin).isEmpty)
            let filed = try await b.createItem(
                named: "Hall", scenario: main.id, budgeted: 1, folder: folder.id, as: admin)
            #expect(try await b.items(scenario: main.id, as: admin).map(\.folderID) == [filed.folderID])
            let refusal = await expectBudgetRefusal(.notFound) {
                _ = try await b.recordGift(from: "Aunt", amount: 5, received: true, budgetItem: UUID(), as: admin)
            }
            #expect(refusal?.message == BudgetRecord.item.notFound.message)
            #expect(try await b.gifts(as: admin).isEmpty)
        }
    }

    @Test(
        "editing an expense changes only the fields given, never its amount; a refused edit changes nothing",
        arguments: Backend.allCases)
    func editExpense(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let due = CalendarDay("2026-05-01")!
            let hall = try await b.createExpense(
                named: "Hall", amount: 1200, vendor: "Castle", dueDate: due, category: "Venue", as: admin)
            let renamed = try await b.editExpense(hall.id, ExpenseEdit(name: "Hall deposit"), as: admin)
            #expect(renamed.name == "Hall deposit" && renamed.vendor == "Castle" && renamed.dueDate == due)
            let later = CalendarDay("2026-06-15")!
            _ = try await b.editExpense(hall.id, ExpenseEdit(vendor: "Manor", dueDate: .some(later)), as: admin)
            _ = try await b.editExpense(hall.id, ExpenseEdit(category: "Venues"), as: admin)
            #expect(
                try await b.expenses(as: admin) == [
                    Expense(
                        id: hall.id, name: "Hall deposit", vendor: "Manor", amount: 1200, dueDate: later,
                        category: "Venues")
                ])
            let undated = try await b.editExpense(hall.id, ExpenseEdit(dueDate: .some(nil)), as: admin)
            #expect(undated.dueDate == nil && undated.amount == 1200)

            try await expectRefusedEdits(
                [
                    (hall.id, ExpenseEdit(), .invalidInput),
                    (hall.id, ExpenseEdit(name: "  "), .invalidInput),
                    (hall.id, ExpenseEdit(vendor: String(repeating: "v", count: 201)), .invalidInput),
                    (UUID(), ExpenseEdit(name: "Other"), .notFound),
                ], edit: { _ = try await b.editExpense($0, $1, as: admin) },
                listing: { try await b.expenses(as: admin) })
            await #expect(throws: BudgetError(.invalidInput, "vendor must be at most 200 characters, not 201")) {
                _ = try await b.editExpense(hall.id, ExpenseEdit(vendor: String(repeating: "v", count: 201)), as: admin)
            }
        }
    }

    @Test(
        "money owed that comes in counts in the overview; a gift moves between items; a refused edit changes nothing",
        arguments: Backend.allCases)
    func editGift(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let hall = try await b.createItem(named: "Hall", scenario: main.id, budgeted: 500, as: admin)
            let food = try await b.createItem(named: "Food", scenario: main.id, budgeted: 500, as: admin)
            let owed = try await b.recordGift(
                from: "Aunt", amount: 100, received: false, budgetItem: hall.id, as: admin)
            func gifts(_ item: UUID) async throws -> Decimal? {
                try await b.overview(scenario: main.id, as: admin).items.first { $0.item.id == item }?.gifts
            }
            #expect(try await gifts(hall.id) == 0, "money owed is not yet a gift received")
            let received = try await b.editGift(owed.id, GiftEdit(received: true), as: admin)
            #expect(received.received && received.from == "Aunt" && received.budgetItemID == hall.id)
            #expect(try await gifts(hall.id) == 100)
            _ = try await b.editGift(owed.id, GiftEdit(amount: 120, budgetItem: .some(food.id)), as: admin)
            #expect(try await gifts(hall.id) == 0)
            #expect(try await gifts(food.id) == 120)
            let unlinked = try await b.editGift(owed.id, GiftEdit(from: "Aunt May", budgetItem: .some(nil)), as: admin)
            #expect(unlinked == Gift(id: owed.id, from: "Aunt May", amount: 120, received: true, budgetItemID: nil))

            try await expectRefusedEdits(
                [
                    (owed.id, GiftEdit(), .invalidInput),
                    (owed.id, GiftEdit(from: ""), .invalidInput),
                    (owed.id, GiftEdit(amount: -1), .invalidInput),
                    (owed.id, GiftEdit(budgetItem: .some(UUID())), .notFound),
                    (UUID(), GiftEdit(received: false), .notFound),
                ], edit: { _ = try await b.editGift($0, $1, as: admin) }, listing: { try await b.gifts(as: admin) })
        }
    }

    @Test(
        "an item is renamed, regrouped and moved between folders of its scenario, its budget and expenses untouched",
        arguments: Backend.allCases)
    func editItem(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let alt = try await b.createScenario(named: "Alt", as: admin)
            let party = try await b.createFolder(named: "Party", scenario: main.id, as: admin)
            let elsewhere = try await b.createFolder(named: "Elsewhere", scenario: alt.id, as: admin)
            let cake = try await b.createItem(named: "Cake", scenario: main.id, budgeted: 300, as: admin)
            let deposit = try await b.createExpense(named: "Deposit", amount: 90, as: admin)
            _ = try await b.allocate(expense: deposit.id, scenario: main.id, items: [cake.id], as: admin)

            let filed = try await b.editItem(
                cake.id, ItemEdit(name: "Wedding cake", event: "Reception", folder: .some(party.id)), as: admin)
            #expect(filed.name == "Wedding cake" && filed.event == "Reception" && filed.folderID == party.id)
            _ = try await b.editItem(cake.id, ItemEdit(category: "Food", folder: .some(nil)), as: admin)
            let line = try #require(try await b.overview(scenario: main.id, as: admin).items.first)
            #expect(
                line.item
                    == BudgetItem(
                        id: cake.id, scenarioID: main.id, folderID: nil, name: "Wedding cake", category: "Food",
                        event: "Reception", budgeted: 300))
            #expect(line.spent == 90)
            #expect(
                try await b.eventCategories(scenario: main.id, as: admin)
                    == EventCategories(events: ["Reception"], categories: ["Food"]))

            try await expectRefusedEdits(
                [
                    (cake.id, ItemEdit(), .invalidInput),
                    (cake.id, ItemEdit(name: " "), .invalidInput),
                    (cake.id, ItemEdit(event: String(repeating: "e", count: 101)), .invalidInput),
                    (cake.id, ItemEdit(folder: .some(elsewhere.id)), .notFound),
                    (UUID(), ItemEdit(name: "Other"), .notFound),
                ],
                edit: { _ = try await b.editItem($0, $1, as: admin) },
                listing: { try await b.items(scenario: main.id, as: admin) })
        }
    }

    @Test(
        "a label is kept without the space around it and listed once whatever its case, so items group as they read",
        arguments: Backend.allCases)
    func labelsGroupAsTheyRead(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let cake = try await b.createItem(
                named: "Cake", scenario: main.id, budgeted: 300, category: "Food ", event: " Reception", as: admin)
            let wine = try await b.createItem(
                named: "Wine", scenario: main.id, budgeted: 90, category: "\u{3000}Food", event: "\u{200B} ",
                as: admin)
            #expect([cake.category, cake.event, wine.category, wine.event] == ["Food", "Reception", "Food", ""])
            #expect(try await b.editItem(cake.id, ItemEdit(event: "\u{2800}"), as: admin).event == "")
            let deposit = try await b.createExpense(
                named: "Deposit", amount: 90, vendor: " Bakery\u{A0}", category: "Food\u{2003}", as: admin)
            #expect([deposit.vendor, deposit.category] == ["Bakery", "Food"])
            #expect(try await b.items(scenario: main.id, as: admin).map(\.category) == ["Food", "Food"])
            #expect(try await b.expenses(as: admin).map(\.vendor) == ["Bakery"], "stored as returned")
            #expect(
                try await b.eventCategories(scenario: main.id, as: admin)
                    == EventCategories(events: [], categories: ["Food"]))

            // Labels that differ only in case are listed once, as most items spell them, and sorted regardless
            // of case; each item keeps its own spelling.
            for (name, category, event) in [
                ("Roses", "flowers", "Ceremony"), ("Tulips", "Flowers", "ceremony"), ("Lilies", "Flowers", ""),
                ("Beer", "FOOD", "reception"), ("Juice", "apéritif", "Reception"), ("Tonic", "APÉRITIF", ""),
            ] {
                _ = try await b.createItem(
                    named: name, scenario: main.id, budgeted: 10, category: category, event: event, as: admin)
            }
            #expect(
                try await b.eventCategories(scenario: main.id, as: admin)
                    == EventCategories(events: ["Ceremony", "Reception"], categories: ["APÉRITIF", "Flowers", "Food"]))
            #expect(
                try await b.items(scenario: main.id, as: admin).map(\.category).sorted()
                    == ["APÉRITIF", "FOOD", "Flowers", "Flowers", "Food", "Food", "apéritif", "flowers"])
        }
    }

    @Test("a scenario and a folder are renamed, nothing else about them changes", arguments: Backend.allCases)
    func rename(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let party = try await b.createFolder(named: "Party", scenario: main.id, as: admin)
            let cake = try await b.createItem(
                named: "Cake", scenario: main.id, budgeted: 300, folder: party.id, as: admin)

            #expect(
                try await b.renameScenario(main.id, to: "Dream", as: admin)
                    == Scenario(id: main.id, name: "Dream", isPrimary: true, createdAt: main.createdAt))
            #expect(
                try await b.renameFolder(party.id, to: "Reception", as: admin)
                    == Folder(id: party.id, scenarioID: main.id, name: "Reception"))
            #expect(try await b.scenarios(as: admin).map(\.name) == ["Dream"])
            #expect(try await b.folders(scenario: main.id, as: admin).map(\.name) == ["Reception"])
            #expect(try await b.items(scenario: main.id, as: admin) == [cake], "its items stay where they were")

            for (rename, code) in [
                (
                    { _ = try await b.renameScenario(main.id, to: "  ", as: admin) },
                    BudgetError.Code.invalidInput
                ),
                (
                    { _ = try await b.renameFolder(party.id, to: String(repeating: "f", count: 201), as: admin) },
                    .invalidInput
                ),
                ({ _ = try await b.renameScenario(UUID(), to: "Other", as: admin) }, .notFound),
                ({ _ = try await b.renameFolder(UUID(), to: "Other", as: admin) }, .notFound),
                ({ _ = try await b.renameFolder(main.id, to: "Other", as: admin) }, .notFound),
            ] as [(() async throws -> Void, BudgetError.Code)] {
                await expectBudgetRefusal(code, rename)
            }
            #expect(try await b.scenarios(as: admin).map(\.name) == ["Dream"])
            #expect(try await b.folders(scenario: main.id, as: admin).map(\.name) == ["Reception"])
        }
    }

    @Test(
        "every listing pages as it lists: pages of 2 hold each row once, in the listing's order; the last is short; a page follows the place of a row deleted since",
        arguments: Backend.allCases)
    func paging(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let main = try await b.createScenario(named: "Main", primary: true, as: admin)
            let deposit = try await b.createExpense(named: "Deposit", amount: 100, as: admin)
            // Odd names in small letters: listed by name regardless of case, they alternate with the others.
            func name(_ letter: String, _ n: Int) -> String {
                n % 2 == 1 ? "\(letter.lowercased())\(n)" : "\(letter)\(n)"
            }
            for n in 1...4 {
                _ = try await b.createScenario(named: "S\(n)", as: admin)
                // The even ones due, in the order of their numbers: listed first, and a page begins after one.
                _ = try await b.createExpense(
                    named: name("E", n), amount: 10, dueDate: n % 2 == 0 ? CalendarDay("2027-0\(n)-01") : nil,
                    as: admin)
            }
            for n in 1...5 {
                _ = try await b.createFolder(named: name("F", n), scenario: main.id, as: admin)
                _ = try await b.createItem(named: name("I", n), scenario: main.id, budgeted: 10, as: admin)
                _ = try await b.recordPayment(expense: deposit.id, amount: 1, as: admin)
                _ = try await b.recordGift(from: name("G", n), amount: 1, received: false, as: admin)
            }
            #expect(try await b.items(scenario: main.id, as: admin).map(\.name) == ["i1", "I2", "i3", "I4", "i5"])
            #expect(try await b.folders(scenario: main.id, as: admin).map(\.name) == ["f1", "F2", "f3", "F4", "f5"])
            #expect(try await b.expenses(as: admin).map(\.name) == ["E2", "E4", "Deposit", "e1", "e3"])
            #expect(try await b.gifts(as: admin).map(\.from) == ["g1", "G2", "g3", "G4", "g5"])
            let today = CalendarDay.today()

            /// Pages of 2 of a listing, each after the place of the last row of the one before (its cursor, then
            /// its id alone), until one is short; and the rows they hold should be every row of the unpaged
            /// listing, once each, in its order.
            func expectPages<Row: Hashable, Key>(
                _ name: String, _ cursor: (Row) -> PageCursor<Key>, every: [Row],
                _ read: (PageRequest<Key>) async throws -> [Row]
            ) async throws {
                for idAlone in [false, true] {
                    var pages: [[Row]] = []
                    var after: PageCursor<Key>?
                    repeat {
                        let page = try await read(PageRequest(limit: 2, after: after))
                        pages.append(page)
                        after = page.last.map(cursor).map { idAlone ? PageCursor(id: $0.id) : $0 }
                    } while pages.last?.count == 2 && pages.count < 10
                    #expect(pages.map(\.count) == [2, 2, 1], "\(name)")
                    #expect(Array(pages.joined()) == every, "\(name)")
                }
            }
            try await expectPages("scenarios", \.cursor, every: try await b.scenarios(as: admin)) {
                try await b.scenarios(page: $0, as: admin)
            }
            try await expectPages("folders", \.cursor, every: try await b.folders(scenario: main.id, as: admin)) {
                try await b.folders(scenario: main.id, page: $0, as: admin)
            }
            try await expectPages("items", \.cursor, every: try await b.items(scenario: main.id, as: admin)) {
                try await b.items(scenario: main.id, page: $0, as: admin)
            }
            try await expectPages("expenses", \.cursor, every: try await b.expenses(as: admin)) {
                try await b.expenses(page: $0, as: admin)
            }
            try await expectPages("payments", \.cursor, every: try await b.payments(expense: deposit.id, as: admin)) {
                try await b.payments(expense: deposit.id, page: $0, as: admin)
            }
            try await expectPages(
                "payment statuses", \.cursor, every: try await b.paymentStatuses(today: today, as: admin)
            ) { try await b.paymentStatuses(today: today, page: $0, as: admin) }
            try await expectPages("gifts", \.cursor, every: try await b.gifts(as: admin)) {
                try await b.gifts(page: $0, as: admin)
            }
            let paid = try await b.paymentStatuses(today: today, page: PageRequest(limit: 1000, after: nil), as: admin)
            #expect(paid.first { $0.expenseID == deposit.id }?.paid == 5, "a page's statuses count their payments")

            /// The row the first page of 2 ended at is deleted before the next page is read: that page still
            /// begins after its place (the third and fourth rows), while its id alone is refused.
            func expectPlaceKept<Row: Hashable & Identifiable<UUID>, Key>(
                _ record: BudgetRecord, _ cursor: (Row) -> PageCursor<Key>,
                _ read: (PageRequest<Key>) async throws -> [Row]
            ) async throws {
                let every = try await read(PageRequest(limit: 1000, after: nil))
                let last = try #require(try await read(PageRequest(limit: 2, after: nil)).last)
                _ = try await b.delete(record, id: last.id, as: admin)
                #expect(try await read(PageRequest(limit: 2, after: cursor(last))) == Array(every[2..<4]), "\(record)")
                await expectBudgetRefusal(.notFound) {
                    _ = try await read(PageRequest(limit: 2, after: PageCursor(id: last.id)))
                }
            }
            try await expectPlaceKept(.scenario, \.cursor) { try await b.scenarios(page: $0, as: admin) }
            try await expectPlaceKept(.folder, \.cursor) { try await b.folders(scenario: main.id, page: $0, as: admin) }
            try await expectPlaceKept(.item, \.cursor) { try await b.items(scenario: main.id, page: $0, as: admin) }
            try await expectPlaceKept(.payment, \.cursor) {
                try await b.payments(expense: deposit.id, page: $0, as: admin)
            }
            try await expectPlaceKept(.expense, \.cursor) { try await b.expenses(page: $0, as: admin) }
            try await expectPlaceKept(.gift, \.cursor) { try await b.gifts(page: $0, as: admin) }
        }
    }

    @Test(
        "text is measured as the tables measure it: at the limit in Unicode scalars it is stored, past it refused",
        arguments: Backend.allCases)
    func textLimitsInScalars(backend: Backend) async throws {
        try await Self.withBudget(backend) { b in
            let admin = Self.admin
            let (name, label) = (accented(200), accented(100))
            let main = try await b.createScenario(named: name, primary: true, as: admin)
            let folder = try await b.createFolder(named: name, scenario: main.id, as: admin)
            let item = try await b.createItem(
                named: name, scenario: main.id, budgeted: 1, folder: folder.id, category: label, event: label,
                as: admin)
            let expense = try await b.createExpense(named: name, amount: 1, vendor: name, category: label, as: admin)
            let gift = try await b.recordGift(from: name, amount: 1, received: false, as: admin)
            #expect(
                [main.name, folder.name, item.name, expense.name, expense.vendor, gift.from]
                    == Array(repeating: name, count: 6))
            #expect([item.category, item.event, expense.category] == [label, label, label])
            #expect(item.name.storedLength == 200 && item.category.storedLength == 100, "stored as given")

            // One scalar past the limit is still only half the limit in characters to Swift; it must be refused
            // before the table's check sees it.
            let (longName, longLabel) = (accented(201), accented(101))
            func listings() async throws -> String {
                "\(try await b.scenarios(as: admin)) \(try await b.folders(scenario: main.id, as: admin)) "
                    + "\(try await b.items(scenario: main.id, as: admin)) \(try await b.expenses(as: admin)) "
                    + "\(try await b.gifts(as: admin))"
            }
            let before = try await listings()
            let refused: [() async throws -> Void] = [
                { _ = try await b.createScenario(named: longName, as: admin) },
                { _ = try await b.renameScenario(main.id, to: longName, as: admin) },
                { _ = try await b.createFolder(named: longName, scenario: main.id, as: admin) },
                { _ = try await b.createItem(named: longName, scenario: main.id, budgeted: 1, as: admin) },
                {
                    _ = try await b.createItem(
                        named: "Hall", scenario: main.id, budgeted: 1, category: longLabel, as: admin)
                },
                { _ = try await b.editItem(item.id, ItemEdit(event: longLabel), as: admin) },
                { _ = try await b.createExpense(named: "Deposit", amount: 1, vendor: longName, as: admin) },
                { _ = try await b.editExpense(expense.id, ExpenseEdit(category: longLabel), as: admin) },
                { _ = try await b.recordGift(from: longName, amount: 1, received: false, as: admin) },
            ]
            for attempt in refused { await expectBudgetRefusal(.invalidInput, attempt) }
            #expect(try await listings() == before, "a refused write changes nothing")
        }
    }
}

/// Expects each edit of `edits` to be refused with its code, and `listing` to read the same afterwards: a refused
/// edit changes nothing.
private func expectRefusedEdits<Edit, Listing: Equatable>(
    _ edits: [(UUID, Edit, BudgetError.Code)], edit: (UUID, Edit) async throws -> Void,
    listing: () async throws -> Listing, sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let before = try await listing()
    for (id, change, code) in edits {
        await expectBudgetRefusal(code, { try await edit(id, change) }, sourceLocation: sourceLocation)
    }
    #expect(try await listing() == before, "a refused edit changes nothing", sourceLocation: sourceLocation)
}
