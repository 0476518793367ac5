import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Server

@Suite("JSON bodies that are not strict JSON")
struct StrictJSONBodyTests {
    @Test("every JSON route refuses a repeated key, a trailing comma, a malformed number or one it would round")
    func routes() async throws {
        let fixture = try await Fixture()
        let acting = fixture.keyHeader(actingAs: fixture.owner)
        let planner = try await fixture.member("pia", "planner").userID
        let check = #"{"couple_id":"\#(fixture.couple)","user_id":"\#(planner)","permission":"couple.delete""#
        let (repeated, comma) = ("more than once in one object", "is not JSON: a comma before }")
        let membersRoute = "/v1/couples/\(fixture.couple)/members"
        let scenariosRoute = "/v1/couples/\(fixture.couple)/budget/scenarios"
        let expensesRoute = "/v1/couples/\(fixture.couple)/budget/expenses"
        // Not whole cents, and refused as such only if read as written: Foundation would read it as 5.
        let fiveAndABit = "5." + String(repeating: "0", count: 40) + "1"
        try await fixture.application().test(.router) { client in
            for (method, uri, headers, body, problem) in [
                (
                    HTTPRequest.Method.post, "/v1/check", fixture.keyHeader, check + #","permission":"budget.edit"}"#,
                    repeated
                ),
                (.post, "/v1/check", fixture.keyHeader, check + ",}", comma),
                (.post, "/v1/check/batch", fixture.keyHeader, #"{"checks":[\#(check)}],"checks":[]}"#, repeated),
                (.post, "/v1/check/batch", fixture.keyHeader, #"{"checks":[\#(check)},]}"#, "a comma before ]"),
                (.post, membersRoute, acting, #"{"user_id":"\#(planner)","role":"owner","role":"viewer"}"#, repeated),
                (.post, membersRoute, acting, #"{"user_id":"\#(planner)","role":"owner",}"#, comma),
                (.post, scenariosRoute, acting, #"{"name":"Main","name":"Other"}"#, repeated),
                (.post, scenariosRoute, acting, #"{"name":"Main",}"#, comma),
                // A value the decoder would skip unread, under a key the route does not take.
                (.post, scenariosRoute, acting, #"{"name":"Main","junk":01}"#, "a number with a leading zero"),
                (.post, scenariosRoute, acting, #"{"name":"Main"}"# + String(repeating: " ", count: 3) + "x", "after"),
                (
                    .post, expensesRoute, acting, #"{"name":"Deposit","amount":\#(fiveAndABit)}"#,
                    "holds a number of more than 38 significant digits at byte 28, which would be read rounded"
                ),
                // JSON that Foundation cannot read (a Double takes up to 1e308), under a key the route does not take.
                (
                    .post, scenariosRoute, acting, #"{"name":"Main","x":1e400}"#,
                    "holds a number with a digit out of the places 1e-128 to 1e127 at byte 20"
                ),
            ] {
                try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: body)) {
                    #expect($0.status == .badRequest, "\(uri) \(body)")
                    #expect(text($0).contains(problem), "\(uri) \(body): \(text($0))")
                }
            }
            // Nothing was done: the planner is still a planner, and the couple has no scenario and no expense.
            let members = try await fixture.repository.members(
                couple: fixture.couple, limit: 10, after: nil, as: .operator(label: "tests"))
            #expect(members.first { $0.user.id == planner }?.role.rawValue == "planner")
            for route in [scenariosRoute, expensesRoute] {
                try await client.execute(uri: route, method: .get, headers: acting) {
                    #expect($0.status == .ok)
                    #expect(text($0) == "[]", "\(route): \(text($0))")
                }
            }
        }
    }

    @Test("a budget body's keys are read only as documented; another spelling of a key is refused, named")
    func otherSpellings() async throws {
        let fixture = try await Fixture()
        let acting = fixture.keyHeader(actingAs: fixture.owner)
        let base = "/v1/couples/\(fixture.couple)/budget"
        try await fixture.application().test(.router) { client in
            func post(_ path: String, _ json: String) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(
                    uri: base + path, method: .post, headers: acting, body: ByteBuffer(string: json)
                ) { ($0.status, text($0)) }
            }
            func id(_ answer: (HTTPResponse.Status, String)) throws -> String {
                let object = try JSONSerialization.jsonObject(with: Data(answer.1.utf8)) as? [String: Any]
                return try #require(object?["id"] as? String, "\(answer)")
            }
            let scenario = try id(try await post("/scenarios", #"{"name":"Main"}"#))
            let folder = try id(try await post("/scenarios/\(scenario)/folders", #"{"name":"Party"}"#))
            // Another spelling beside the documented key, which `.convertFromSnakeCase` would have read first.
            let items = "/scenarios/\(scenario)/items"
            let (refused, answer) = try await post(
                items, #"{"name":"Cake","budgeted":1,"folderId":"\#(UUID())","folder_id":"\#(folder)"}"#)
            #expect(refused == .badRequest && answer.contains(#"names \"folderId\""#), "\(refused) \(answer)")
            let (created, item) = try await post(items, #"{"name":"Cake","budgeted":1,"folder_id":"\#(folder)"}"#)
            #expect(created == .created && item.contains(#""folder_id":"\#(folder)""#), "\(created) \(item)")
            let expense = try id(try await post("/expenses", #"{"name":"Deposit","amount":10}"#))
            for spelling in ["scenarioId", "SCENARIO_ID", "scenario__id", "Scenario_Id"] {
                let (status, body) = try await post(
                    "/expenses/\(expense)/allocations", #"{"\#(spelling)":"\#(scenario)","items":[]}"#)
                #expect(status == .badRequest && body.contains(#"names \"\#(spelling)\""#), "\(spelling): \(body)")
            }
        }
    }
}
