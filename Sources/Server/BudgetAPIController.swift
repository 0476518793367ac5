import Budget
import Collaboration
import Foundation
import Hummingbird

/// The budget under `/v1/couples/{couple}/budget`, with the same authentication as the management API: the
/// service key authenticates the backend and `X-Acting-User` names the user whose permissions apply. Every
/// request runs on the couple's actor from the registry. Amounts are JSON numbers with at most two decimals.
struct BudgetAPIController {
    let registry: BudgetRegistry

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        let budget = group.group("couples/:couple/budget")
        budget.get("scenarios") { request, context in
            try await list("scenarios", request, context) { try await $0.scenarios(page: $2, as: $1) }
        }
        budget.post("scenarios") { request, context in
            struct Body: Decodable {
                let name: String
                let primary: Bool?
            }
            let body = try await decode(Body.self, request, context)
            return try await run(request, context, status: .created) { b, actor in
                try await b.createScenario(named: body.name, primary: body.primary ?? false, as: actor)
            }
        }
        budget.post("scenarios/:scenario/clone") { request, context in
            struct Body: Decodable { let name: String }
            let body = try await decode(Body.self, request, context)
            let scenario = try id(context, "scenario")
            return try await run(request, context, status: .created) { b, actor in
                try await b.cloneScenario(scenario, named: body.name, as: actor)
            }
        }
        budget.post("scenarios/:scenario/primary") { request, context in
            let scenario = try id(context, "scenario")
            return try await run(request, context) { b, actor in try await b.setPrimaryScenario(scenario, as: actor) }
        }
        budget.patch("scenarios/:scenario") { request, context in
            struct Body: Decodable { let name: String }
            let body = try await decode(Body.self, request, context)
            let scenario = try id(context, "scenario")
            return try await run(request, context) { b, actor in
                try await b.renameScenario(scenario, to: body.name, as: actor)
            }
        }
        budget.patch("folders/:folder") { request, context in
            struct Body: Decodable { let name: String }
            let body = try await decode(Body.self, request, context)
            let folder = try id(context, "folder")
            return try await run(request, context) { b, actor in
                try await b.renameFolder(folder, to: body.name, as: actor)
            }
        }
        budget.get("scenarios/:scenario/overview") { request, context in
            let scenario = try id(context, "scenario")
            let overview = try await perform(request, context) { b, actor in
                try await b.overview(scenario: scenario, as: actor)
            }
            return PermissionAPIController.response(json: OverviewJSON.body(overview))
        }
        budget.get("scenarios/:scenario/items") { request, context in
            let scenario = try id(context, "scenario")
            return try await list("items", request, context) {
                try await $0.items(scenario: scenario, page: $2, as: $1)
            }
        }
        budget.get("scenarios/:scenario/folders") { request, context in
            let scenario = try id(context, "scenario")
            return try await list("folders", request, context) {
                try await $0.folders(scenario: scenario, page: $2, as: $1)
            }
        }
        budget.get("scenarios/:scenario/categories") { request, context in
            let scenario = try id(context, "scenario")
            return try await run(request, context) { b, actor in
                try await b.eventCategories(scenario: scenario, as: actor)
            }
        }
        budget.post("scenarios/:scenario/folders") { request, context in
            struct Body: Decodable { let name: String }
            let body = try await decode(Body.self, request, context)
            let scenario = try id(context, "scenario")
            return try await run(request, context, status: .created) { b, actor in
                try await b.createFolder(named: body.name, scenario: scenario, as: actor)
            }
        }
        budget.post("scenarios/:scenario/items") { request, context in
            struct Body: Decodable {
                let name: String
                let budgeted: Decimal
                let folderId: UUID?
                let category: String?
                let event: String?
            }
            let body = try await decode(Body.self, request, context)
            let scenario = try id(context, "scenario")
            return try await run(request, context, status: .created) { b, actor in
                try await b.createItem(
                    named: body.name, scenario: scenario, budgeted: body.budgeted, folder: body.folderId,
                    category: body.category ?? "", event: body.event ?? "", as: actor)
            }
        }
        budget.patch("items/:item") { request, context in
            /// Absent keys change nothing; `"folder_id": null` takes the item out of its folder.
            struct Body: Decodable {
                let edit: ItemEdit

                enum CodingKeys: String, CodingKey { case name, category, event, folderId }

                init(from decoder: any Decoder) throws {
                    let body = try decoder.container(keyedBy: CodingKeys.self)
                    edit = ItemEdit(
                        name: try body.decodeIfPresent(String.self, forKey: .name),
                        category: try body.decodeIfPresent(String.self, forKey: .category),
                        event: try body.decodeIfPresent(String.self, forKey: .event),
                        folder: try body.decodeNullable(UUID.self, forKey: .folderId))
                }
            }
            let body = try await decode(Body.self, request, context)
            let item = try id(context, "item")
            return try await run(request, context) { b, actor in try await b.editItem(item, body.edit, as: actor) }
        }
        budget.put("items/:item/budgeted") { request, context in
            struct Body: Decodable { let amount: Decimal }
            let body = try await decode(Body.self, request, context)
            let item = try id(context, "item")
            return try await run(request, context) { b, actor in
                try await b.setBudgeted(item: item, to: body.amount, as: actor)
            }
        }
        budget.get("expenses") { request, context in
            try await list("expenses", request, context) { try await $0.expenses(page: $2, as: $1) }
        }
        budget.post("expenses") { request, context in
            struct Body: Decodable {
                let name: String
                let amount: Decimal
                let vendor: String?
                let dueDate: CalendarDay?
                let category: String?
            }
            let body = try await decode(Body.self, request, context)
            return try await run(request, context, status: .created) { b, actor in
                try await b.createExpense(
                    named: body.name, amount: body.amount, vendor: body.vendor ?? "", dueDate: body.dueDate,
                    category: body.category ?? "", as: actor)
            }
        }
        budget.patch("expenses/:expense") { request, context in
            /// Absent keys change nothing; `"due_date": null` removes the due date.
            struct Body: Decodable {
                let edit: ExpenseEdit

                enum CodingKeys: String, CodingKey { case name, vendor, category, dueDate }

                init(from decoder: any Decoder) throws {
                    let body = try decoder.container(keyedBy: CodingKeys.self)
                    edit = ExpenseEdit(
                        name: try body.decodeIfPresent(String.self, forKey: .name),
                        vendor: try body.decodeIfPresent(String.self, forKey: .vendor),
                        category: try body.decodeIfPresent(String.self, forKey: .category),
                        dueDate: try body.decodeNullable(CalendarDay.self, forKey: .dueDate))
                }
            }
            let body = try await decode(Body.self, request, context)
            let expense = try id(context, "expense")
            return try await run(request, context) { b, actor in
                try await b.editExpense(expense, body.edit, as: actor)
            }
        }
        budget.put("expenses/:expense/amount") { request, context in
            struct Body: Decodable {
                let amount: Decimal
                let scenarioId: UUID?
            }
            let body = try await decode(Body.self, request, context)
            let expense = try id(context, "expense")
            return try await run(request, context) { b, actor in
                try await b.setAmount(expense: expense, to: body.amount, scenario: body.scenarioId, as: actor)
            }
        }
        budget.post("expenses/:expense/allocations") { request, context in
            struct Body: Decodable {
                /// Without it, the scenario the items are in.
                let scenarioId: UUID?
                let items: [UUID]
                let amounts: [Decimal]?
            }
            let body = try await decode(Body.self, request, context)
            let expense = try id(context, "expense")
            return try await run(request, context) { b, actor in
                try await b.allocate(
                    expense: expense, scenario: body.scenarioId, items: body.items, amounts: body.amounts, as: actor)
            }
        }
        budget.post("expenses/:expense/payments") { request, context in
            struct Body: Decodable {
                let amount: Decimal
                let paidAt: CalendarDay?
            }
            let body = try await decode(Body.self, request, context)
            let expense = try id(context, "expense")
            return try await run(request, context, status: .created) { b, actor in
                try await b.recordPayment(expense: expense, amount: body.amount, paidAt: body.paidAt, as: actor)
            }
        }
        budget.get("expenses/:expense/payments") { request, context in
            let expense = try id(context, "expense")
            return try await list("payments", request, context) {
                try await $0.payments(expense: expense, page: $2, as: $1)
            }
        }
        budget.get("payments") { request, context in
            try await list("payments", request, context) {
                try await $0.paymentStatuses(page: $2, as: $1)
            }
        }
        budget.get("gifts") { request, context in
            try await list("gifts", request, context) { try await $0.gifts(page: $2, as: $1) }
        }
        budget.post("gifts") { request, context in
            struct Body: Decodable {
                let from: String
                let amount: Decimal
                let received: Bool?
                let budgetItemId: UUID?
            }
            let body = try await decode(Body.self, request, context)
            return try await run(request, context, status: .created) { b, actor in
                try await b.recordGift(
                    from: body.from, amount: body.amount, received: body.received ?? false,
                    budgetItem: body.budgetItemId,
                    as: actor)
            }
        }
        budget.patch("gifts/:gift") { request, context in
            /// Absent keys change nothing; `"budget_item_id": null` sets the gift against no item.
            struct Body: Decodable {
                let edit: GiftEdit

                enum CodingKeys: String, CodingKey { case from, amount, received, budgetItemId }

                init(from decoder: any Decoder) throws {
                    let body = try decoder.container(keyedBy: CodingKeys.self)
                    edit = GiftEdit(
                        from: try body.decodeIfPresent(String.self, forKey: .from),
                        amount: try body.decodeIfPresent(Decimal.self, forKey: .amount),
                        received: try body.decodeIfPresent(Bool.self, forKey: .received),
                        budgetItem: try body.decodeNullable(UUID.self, forKey: .budgetItemId))
                }
            }
            let body = try await decode(Body.self, request, context)
            let gift = try id(context, "gift")
            return try await run(request, context) { b, actor in try await b.editGift(gift, body.edit, as: actor) }
        }
        // DELETE scenarios/:scenario, folders/:folder, items/:item, expenses/:expense, payments/:payment and
        // gifts/:gift (the parameter names the other routes give these paths).
        for record in BudgetRecord.allCases {
            budget.delete("\(record.rawValue)s/:\(record.rawValue)") { request, context in
                let id = try id(context, record.rawValue)
                return try await run(request, context) { b, actor in try await b.delete(record, id: id, as: actor) }
            }
        }
    }

    /// Runs `body` on the couple's actor, acting for `X-Acting-User`, and answers with its result as JSON.
    private func run(
        _ request: Request, _ context: AppRequestContext, status: HTTPResponse.Status = .ok,
        _ body: @Sendable (CoupleBudget, Actor) async throws -> some Encodable & Sendable
    ) async throws -> Response {
        var response = try PermissionAPIController.json(try await perform(request, context, body))
        response.status = status
        return response
    }

    /// Runs a listing on the couple's actor: every row, as a JSON array; or, when the request names `limit` or
    /// `after`, one page of the same listing, `{"<name>": [...], "next_after": ...}`, as the other listings page.
    private func list<Row: Encodable & Sendable & ListedRow>(
        _ name: String, _ request: Request, _ context: AppRequestContext,
        _ body: @Sendable (CoupleBudget, Actor, PageRequest<Row.OrderKey>?) async throws -> [Row]
    ) async throws -> Response where Row.OrderKey: PlaceKey {
        guard let page = try PermissionAPIController.pageAsked(request, keyedBy: Row.OrderKey.self) else {
            return try await run(request, context) { try await body($0, $1, nil) }
        }
        let rows = try await perform(request, context) { try await body($0, $1, page) }
        return try PermissionAPIController.json(
            PermissionAPIController.Page(name, rows, limit: page.limit))
    }

    /// Runs `body` on the couple's actor, acting for `X-Acting-User`.
    private func perform<Value: Sendable>(
        _ request: Request, _ context: AppRequestContext,
        _ body: @Sendable (CoupleBudget, Actor) async throws -> Value
    ) async throws -> Value {
        let actor = try request.actingUser()
        let couple = try id(context, "couple")
        return try await registry.with(couple) { try await body($0, actor) }
    }

    private func id(_ context: AppRequestContext, _ name: String) throws -> UUID {
        try APIError.uuid(context.parameters.get(name), "\(name) id")
    }

    /// The JSON body, its keys spelled as the API documents them.
    private func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: AppRequestContext) async throws
        -> T
    {
        try await StrictJSONDecoder(keys: .documentedSnakeCase).decode(T.self, from: request, context: context)
    }
}

extension JSONDecoder.KeyDecodingStrategy {
    /// A body's keys in the spelling the API documents (`folder_id` read as `folderId`) and no other.
    /// `.convertFromSnakeCase` also reads `folderId`, `FOLDER_ID` and `folder__id` as that field, first one
    /// winning, so a gateway that checks `folder_id` could pass a body this service reads another value from;
    /// here any other spelling names no field, and `documentedJSONBody` has refused it as a key the route does not
    /// take.
    fileprivate static let documentedSnakeCase = Self.custom { path in
        let key = path.last?.stringValue ?? ""
        let words = key.split(separator: "_", omittingEmptySubsequences: false)
        let documented = words.allSatisfy { word in
            !word.isEmpty && word.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber) }
        }
        guard documented else { return BodyKey(stringValue: " " + key) }
        return BodyKey(
            stringValue: words[0] + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined())
    }

    /// A key the custom strategy hands back; a space, which no Swift name has, keeps an undocumented one unread.
    private struct BodyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
