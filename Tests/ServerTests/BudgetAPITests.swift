import Budget
import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import InMemoryRepositories
import Secrets
import Synchronization
import Testing

@testable import Server

@Suite("Budget API (in-memory repositories)")
struct BudgetAPITests {
    @Test("an owner builds a budget and reads the overview; a viewer reads but may not edit; bad input is 400")
    func budget() async throws {
        let fixture = try await Fixture()
        let viewer = try await fixture.member("vic", "viewer").userID
        try await fixture.application().test(.router) { client in
            let owner = fixture.keyHeader(actingAs: fixture.owner)
            let asViewer = fixture.keyHeader(actingAs: viewer)
            let base = "/v1/couples/\(fixture.couple)/budget"

            func post(_ path: String, _ json: String, _ headers: HTTPFields) async throws -> (
                HTTPResponse.Status, [String: Any]
            ) {
                try await client.execute(
                    uri: base + path, method: .post, headers: headers, body: ByteBuffer(string: json)
                ) {
                    (
                        $0.status,
                        (try? JSONSerialization.jsonObject(with: Data(buffer: $0.body))) as? [String: Any] ?? [:]
                    )
                }
            }
            let (created, scenario) = try await post("/scenarios", #"{"name":"Main","primary":true}"#, owner)
            #expect(created == .created)
            let scenarioID = try #require(scenario["id"] as? String)
            #expect(scenario["is_primary"] as? Bool == true)
            let (_, venue) = try await post(
                "/scenarios/\(scenarioID)/items", #"{"name":"Venue","budgeted":1000}"#, owner)
            let (_, food) = try await post(
                "/scenarios/\(scenarioID)/items", #"{"name":"Food","budgeted":3000,"event":"Reception"}"#, owner)
            let (_, expense) = try await post(
                "/expenses", #"{"name":"Deposit","amount":100.01,"due_date":"2026-01-05"}"#, owner)
            let items = [venue["id"] as! String, food["id"] as! String]
            let expenseID = try #require(expense["id"] as? String)
            let (allocated, _) = try await post(
                "/expenses/\(expenseID)/allocations",
                #"{"scenario_id":"\#(scenarioID)","items":["\#(items[0])","\#(items[1])"]}"#, owner)
            #expect(allocated == .ok)
            // Without a scenario, the items' own; it replaces what the expense had there.
            try await client.execute(
                uri: base + "/expenses/\(expenseID)/allocations", method: .post, headers: owner,
                body: ByteBuffer(string: #"{"items":["\#(items[1])","\#(items[0])"]}"#)
            ) {
                #expect($0.status == .ok)
                let rows = try #require(
                    try JSONSerialization.jsonObject(with: Data(buffer: $0.body)) as? [[String: Any]])
                #expect(rows.map { $0["scenario_id"] as? String } == [scenarioID, scenarioID])
            }

            try await client.execute(uri: base + "/scenarios/\(scenarioID)/overview", method: .get, headers: asViewer) {
                #expect($0.status == .ok)
                let body = try #require(try JSONSerialization.jsonObject(with: Data(buffer: $0.body)) as? [String: Any])
                let totals = try #require(body["totals"] as? [String: Any])
                #expect((totals["spent"] as? NSNumber)?.decimalValue == Decimal(string: "100.01"))
                #expect((body["items"] as? [Any])?.count == 2)
            }
            // Folders and the events and categories items are grouped by, as a viewer reads them.
            let (filed, folder) = try await post("/scenarios/\(scenarioID)/folders", #"{"name":"Party"}"#, owner)
            #expect(filed == .created)
            let folderID = try #require(folder["id"] as? String)
            let (_, cake) = try await post(
                "/scenarios/\(scenarioID)/items",
                #"{"name":"Cake","budgeted":300,"folder_id":"\#(folderID)","category":"Food"}"#, owner)
            #expect(cake["folder_id"] as? String == folderID)
            try await client.execute(uri: base + "/scenarios/\(scenarioID)/folders", method: .get, headers: asViewer) {
                #expect($0.status == .ok && String(buffer: $0.body).contains(folderID))
            }
            try await client.execute(
                uri: base + "/scenarios/\(scenarioID)/categories", method: .get, headers: asViewer
            ) {
                #expect(String(buffer: $0.body) == #"{"categories":["Food"],"events":["Reception"]}"#)
            }
            try await client.execute(
                uri: base + "/items/\(items[0])", method: .patch, headers: owner,
                body: ByteBuffer(string: #"{"folder_id":"\#(folderID)","event":"Ceremony"}"#)
            ) {
                #expect($0.status == .ok)
                #expect(String(buffer: $0.body).contains(folderID) && String(buffer: $0.body).contains("Ceremony"))
            }
            try await client.execute(
                uri: base + "/items/\(items[0])", method: .patch, headers: asViewer,
                body: ByteBuffer(string: #"{"name":"X"}"#)
            ) { #expect($0.status == .forbidden) }
            #expect(try await post("/scenarios", #"{"name":"Mine"}"#, asViewer).0 == .forbidden)
            // Renames: a scenario and a folder; a viewer may not, an unknown id is 404, a blank name 400.
            func rename(_ path: String, _ json: String, _ headers: HTTPFields) async throws -> (
                HTTPResponse.Status, String
            ) {
                try await client.execute(
                    uri: base + path, method: .patch, headers: headers, body: ByteBuffer(string: json)
                ) {
                    ($0.status, String(buffer: $0.body))
                }
            }
            let renamed = try await rename("/scenarios/\(scenarioID)", #"{"name":"Dream"}"#, owner)
            #expect(renamed.0 == .ok && renamed.1.contains(#""name":"Dream""#), "\(renamed.1)")
            let refiled = try await rename("/folders/\(folderID)", #"{"name":"Reception"}"#, owner)
            #expect(refiled.0 == .ok && refiled.1.contains(#""name":"Reception""#), "\(refiled.1)")
            #expect(try await rename("/scenarios/\(scenarioID)", #"{"name":"Mine"}"#, asViewer).0 == .forbidden)
            #expect(try await rename("/folders/\(folderID)", #"{"name":"Mine"}"#, asViewer).0 == .forbidden)
            #expect(try await rename("/folders/\(UUID())", #"{"name":"Other"}"#, owner).0 == .notFound)
            #expect(try await rename("/scenarios/\(scenarioID)", #"{"name":" "}"#, owner).0 == .badRequest)
            #expect(try await rename("/scenarios/\(scenarioID)", #"{}"#, owner).0 == .badRequest)
            try await client.execute(uri: base + "/scenarios", method: .get, headers: asViewer) {
                #expect(String(buffer: $0.body).contains(#""name":"Dream""#), "the refused renames changed nothing")
            }
            try await client.execute(uri: base + "/scenarios/\(scenarioID)/folders", method: .get, headers: asViewer) {
                #expect(String(buffer: $0.body).contains(#""name":"Reception""#))
            }
            #expect(try await post("/expenses", #"{"name":"X","amount":-5}"#, owner).0 == .badRequest)
            #expect(try await post("/expenses", #"{"name":"X","amount":1.005}"#, owner).0 == .badRequest)
            try await client.execute(
                uri: base + "/expenses", method: .post, headers: owner,
                body: ByteBuffer(string: #"{"name":"X","amount":"lots"}"#)
            ) {
                #expect($0.status == .badRequest)
                #expect(
                    String(buffer: $0.body)
                        == #"{"error":{"code":"invalid_input","message":"amount must be a number, e.g. 1250 or 99.90"}}"#,
                    "an error names what the field takes, in the one shape every error has")
            }
            let allocations = "/expenses/\(expenseID)/allocations"
            for (path, body, message) in [
                ("/expenses", #"{"name":"X","amount":null}"#, "amount must be a number, e.g. 1250 or 99.90"),
                ("/expenses", #"{"name":"X"}"#, #"the body lacks "amount""#),
                // Beyond what Decimal reads as written: refused before the decoder, which would not say where.
                ("/expenses", #"{"name":"X","amount":1e128}"#, "the body holds a number with a digit out of the"),
                ("/expenses", #"{"name":"X","amount":1e-129}"#, "the body holds a number with a digit out of the"),
                // Said as every route says it, not in Foundation's words about a Swift type.
                (allocations, #"{"scenario_id":"nope","items":[]}"#, "scenario_id must be a UUID"),
                (
                    allocations, #"{"scenario_id":"\#(scenarioID)","items":["\#(scenarioID)","x"]}"#,
                    "items[1] must be a UUID"
                ),
            ] {
                let (status, answer) = try await post(path, body, owner)
                let said = (answer["error"] as? [String: Any])?["message"] as? String ?? ""
                #expect(status == .badRequest && said.hasPrefix(message), "\(body): \(said)")
            }
            #expect(
                try await post("/expenses", #"{"name":"X","amount":5,"due_date":"2026-02-30"}"#, owner).0 == .badRequest
            )
            #expect(try await post("/expenses", #"{"name":"X","amount":5}"#, fixture.keyHeader).0 == .badRequest)
            #expect(try await post("/expenses/nope/payments", #"{"amount":5}"#, owner).0 == .badRequest)
            let (paid, _) = try await post(
                "/expenses/\(expenseID)/payments", #"{"amount":40,"paid_at":"2026-01-01"}"#, owner)
            #expect(paid == .created)
            try await client.execute(uri: base + "/payments", method: .get, headers: asViewer) {
                #expect(String(buffer: $0.body).contains(#""status":"partial""#))
            }

            // Editing an expense: absent fields stay, a null due date removes it, an empty edit is refused.
            func patch(_ json: String, _ headers: HTTPFields) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(
                    uri: base + "/expenses/\(expenseID)", method: .patch, headers: headers,
                    body: ByteBuffer(string: json)
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let vendor = try await patch(#"{"vendor":"Castle","due_date":"2026-03-01"}"#, owner)
            #expect(vendor.0 == .ok && vendor.1.contains(#""vendor":"Castle""#) && vendor.1.contains("2026-03-01"))
            #expect(vendor.1.contains(#""name":"Deposit""#), "a field not given stays")
            let undated = try await patch(#"{"due_date":null}"#, owner)
            #expect(undated.0 == .ok && !undated.1.contains("due_date") && undated.1.contains("Castle"))
            #expect(try await patch("{}", owner).0 == .badRequest)
            #expect(try await patch(#"{"name":"Mine"}"#, asViewer).0 == .forbidden)
            #expect(try await patch(#"{"due_date":"soon"}"#, owner).0 == .badRequest)

            // Money owed comes in: the gift is marked received, then set against no item.
            let (_, owed) = try await post(
                "/gifts", #"{"from":"Aunt","amount":50,"budget_item_id":"\#(items[1])"}"#, owner)
            let giftID = try #require(owed["id"] as? String)
            func patchGift(_ json: String) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(
                    uri: base + "/gifts/\(giftID)", method: .patch, headers: owner, body: ByteBuffer(string: json)
                ) { ($0.status, String(buffer: $0.body)) }
            }
            let cameIn = try await patchGift(#"{"received":true}"#)
            #expect(
                cameIn.0 == .ok && cameIn.1.contains(#""received":true"#) && cameIn.1.contains(items[1].lowercased()))
            let loose = try await patchGift(#"{"budget_item_id":null}"#)
            #expect(loose.0 == .ok && !loose.1.contains("budget_item_id"))
            #expect(try await patchGift(#"{"amount":-1}"#).0 == .badRequest)

            // Deleting: a viewer may not; the owner may, once; the primary scenario stays.
            func delete(_ path: String, _ headers: HTTPFields) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(uri: base + path, method: .delete, headers: headers) {
                    ($0.status, String(buffer: $0.body))
                }
            }
            func payments() async throws -> [[String: Any]] {
                try await client.execute(uri: base + "/expenses/\(expenseID)/payments", method: .get, headers: asViewer)
                {
                    #expect($0.status == .ok)
                    return try #require(
                        try JSONSerialization.jsonObject(with: Data(buffer: $0.body)) as? [[String: Any]])
                }
            }
            let payment = try #require(try await payments().first?["id"] as? String)
            #expect(try await payments().first?["paid_at"] as? String == "2026-01-01")
            #expect(try await delete("/payments/\(payment)", owner).0 == .ok)
            #expect(try await payments().isEmpty)
            try await client.execute(uri: base + "/expenses/\(UUID())/payments", method: .get, headers: owner) {
                #expect($0.status == .notFound)
            }
            #expect(try await delete("/expenses/\(expenseID)", asViewer).0 == .forbidden)
            let deleted = try await delete("/expenses/\(expenseID)", owner)
            #expect(deleted.0 == .ok)
            #expect(deleted.1 == #"{"deleted":"expense","id":"\#(expenseID.lowercased())"}"#)
            try await client.execute(uri: base + "/expenses", method: .get, headers: owner) {
                #expect(!String(buffer: $0.body).contains(expenseID.lowercased()))
            }
            #expect(try await delete("/expenses/\(expenseID)", owner).0 == .notFound)
            #expect(try await delete("/items/\(items[0])", owner).0 == .ok)
            #expect(try await delete("/gifts/nope", owner).0 == .badRequest)
            let primary = try await delete("/scenarios/\(scenarioID)", owner)
            #expect(primary.0 == .conflict && primary.1.contains(#""code":"primary_scenario""#), "\(primary.1)")
        }
    }

    @Test("a listing with limit or after answers one page of its order with next_after; without, every row")
    func paging() async throws {
        let fixture = try await Fixture()
        try await fixture.application().test(.router) { client in
            let owner = fixture.keyHeader(actingAs: fixture.owner)
            let expenses = "/v1/couples/\(fixture.couple)/budget/expenses"
            var ids: [String] = []
            for name in ["Hall", "Band", "Cake"] {
                try await client.execute(
                    uri: expenses, method: .post, headers: owner,
                    body: ByteBuffer(string: #"{"name":"\#(name)","amount":10}"#)
                ) {
                    let body = try JSONSerialization.jsonObject(with: Data(buffer: $0.body)) as? [String: Any]
                    ids.append(try #require(body?["id"] as? String))
                }
            }
            // The listing's order: by due date (none here), then name.
            ids = [ids[1], ids[2], ids[0]]
            func get(_ query: String) async throws -> (HTTPResponse.Status, Any?) {
                try await client.execute(uri: expenses + query, method: .get, headers: owner) {
                    ($0.status, try? JSONSerialization.jsonObject(with: Data(buffer: $0.body)))
                }
            }
            let (status, every) = try await get("")
            #expect(status == .ok && (every as? [Any])?.count == 3, "without limit or after: every row, as before")
            let first = try #require(try await get("?limit=2").1 as? [String: Any])
            #expect((first["expenses"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == Array(ids[0..<2]))
            let next = try #require(first["next_after"] as? String)
            #expect(next.hasPrefix(ids[1] + "."), "the last row's id, then its place: \(next)")
            let last = try #require(try await get("?limit=2&after=\(ids[1])").1 as? [String: Any])
            #expect((last["expenses"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[2]])
            #expect(last["next_after"] == nil, "a short page is the last")
            let gone = try await get("?limit=2&after=\(UUID())")
            #expect(gone.0 == .notFound, "a page after the id of a row the couple does not have is refused")
            try await client.execute(uri: "\(expenses)/\(ids[1])", method: .delete, headers: owner) {
                #expect($0.status == .ok)
            }
            let afterDeleted = try #require(try await get("?limit=2&after=\(next)").1 as? [String: Any])
            #expect(
                (afterDeleted["expenses"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [ids[2]],
                "next_after holds the place of the row the page ended at, deleted since")
            let nul = Base64URL.encode(Array(#"[{"name":"a\u0000"}]"#.utf8))
            for bad in [
                "?limit=0", "?limit=1001", "?limit=two", "?after=nope", "?limit=+2", "?after=\(ids[0])&after=\(ids[1])",
                "?after=\(ids[0]).x", "?after=\(ids[0]).\(nul)",
                "?after=\(ids[0]).\(Base64URL.encode(Array("[1]".utf8)))",
            ] {
                #expect(try await get(bad).0 == .badRequest, "\(bad)")
            }
        }
    }

    // Bounded by the time limit, not a deadline of its own: CPU-bound tests running beside it can hold both
    // threads of the concurrency pool for seconds, and a deadline that passed meanwhile would fail it although
    // the sweeper had not yet had a turn.
    @Test("with no budget traffic at all, the service's sweeper lets go of idle couples", .timeLimit(.minutes(1)))
    func sweeper() async throws {
        let offset = Mutex<Duration>(.zero)
        let start = ContinuousClock.now
        let checker = PermissionChecker(repository: InMemoryCollaborationRepository(roles: []))
        let registry = BudgetRegistry(
            idleAfter: .milliseconds(40), now: { start + offset.withLock { $0 } },
            make: { CoupleBudget(couple: $0, repository: InMemoryBudgetRepository(), checker: checker) })
        _ = try await registry.with(UUID()) { $0 }
        _ = try await registry.with(UUID()) { $0 }
        let sweeping = Task { await BudgetSweeper(registry: registry).run() }
        offset.withLock { $0 = .seconds(1) }  // both idle for a second of the registry's time
        while registry.count > 0 { try await Task.sleep(for: .milliseconds(5)) }
        sweeping.cancel()
        await sweeping.value
    }
}
