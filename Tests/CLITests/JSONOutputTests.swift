import Collaboration
import Foundation
import TestSupport
import Testing

/// What `--json` prints, held to what the HTTP API answers for the same thing (README: "a write that creates, edits
/// or renames one record prints that record, as the API answers it").
@Suite("The rbac command's --json", .timeLimit(.minutes(2)))
struct JSONOutputTests {
    @Test("each command's --json is what openapi.json describes the API answering for the same record or listing")
    func asDocumented() async throws {
        let checker = try SchemaChecker.openAPI()
        let document = checker.document
        /// A component of the document, or an array of them (`[Name]`).
        func schema(_ name: String) -> JSONValue {
            guard name.hasPrefix("[") else { return .object(["$ref": .string("#/components/schemas/\(name)")]) }
            return .object(["type": .string("array"), "items": schema(String(name.dropFirst().dropLast()))])
        }
        /// What the document says a budget route answers with success.
        func budgetAnswer(_ method: String, _ path: String) throws -> JSONValue {
            let responses = document["paths"]?["/v1/couples/{couple}/budget" + path]?[method]?["responses"]
            return try #require(responses?["200"]?["content"]?["application/json"]?["schema"])
        }
        try await CLITests.withDatabase { rbac, _ in
            var problems: [String] = []
            /// Runs `rbac arguments --json`, checks what it printed against `expected`, and returns it.
            @discardableResult
            func json(_ expected: JSONValue, _ arguments: String...) async throws -> JSONValue {
                try await printed(expected, arguments)
            }
            func printed(_ expected: JSONValue, _ arguments: [String]) async throws -> JSONValue {
                let result = try await rbac(arguments + ["--json"])
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                let printed = try JSONDecoder().decode(JSONValue.self, from: Data(result.stdout.utf8))
                problems += checker.problems(
                    printed, expected, at: arguments.prefix { !$0.hasPrefix("-") }.joined(separator: " "))
                return printed
            }
            /// The id at `path` of what a command printed, by default its own.
            func id(_ value: JSONValue, _ path: String...) throws -> String {
                let keys = path.isEmpty ? ["id"] : path
                return try #require(keys.reduce(value as JSONValue?) { $0?[$1] }?.string, "\(keys)")
            }

            let created = try await json(
                .object([:]), "couples", "create", "--name", "Ours", "--owner-email", "o@example.com")
            problems += checker.problems(
                try #require(created["couple"]), schema("Couple"), at: "couples create .couple")
            problems += checker.problems(try #require(created["owner"]), schema("User"), at: "couples create .owner")
            let couple = try id(created, "couple", "id")
            try await json(schema("Couple"), "couples", "rename", couple, "--name", "Olivia & Paul")
            try await json(schema("[Couple]"), "couples", "list")
            try await json(schema("User"), "users", "add", "--email", "paul@example.com", "--name", "Paul")
            try await json(schema("User"), "users", "edit", "paul@example.com", "--no-name")
            try await json(schema("[User]"), "users", "list", "--search", "pa")
            try await json(
                schema("Membership"), "grant", "--couple", couple, "--user", "paul@example.com", "--role", "planner")
            try await json(schema("Membership"), "suspend", "--couple", couple, "--user", "paul@example.com")
            try await json(schema("Membership"), "reactivate", "--couple", couple, "--user", "paul@example.com")
            try await json(schema("[Member]"), "members", "--couple", couple)
            try await json(schema("CoupleDetail"), "couples", "show", couple)
            try await json(
                schema("Allowed"), "check", "--couple", couple, "--user", "paul@example.com", "--permission",
                "budget.edit")
            try await json(
                schema("CoupleRole"), "roles", "create", "--couple", couple, "--name", "aunt", "--description",
                "Family",
                "--permission", "budget.view")
            try await json(
                schema("CoupleRole"), "roles", "edit", "--couple", couple, "--name", "aunt", "--description", "Aunts")
            try await json(schema("[CoupleRole]"), "roles", "--couple", couple)
            let issued = try await json(
                schema("IssuedInvitation"), "invite", "--couple", couple, "--role", "viewer", "--email",
                "ines@example.com")
            try await json(
                schema("IssuedInvitation"), "invitations", "resend", "--couple", couple,
                try id(issued, "invitation", "id"))
            try await json(schema("[Invitation]"), "invitations", "list", "--couple", couple)
            try await json(schema("Membership"), "transfer-ownership", "--couple", couple, "--to", "paul@example.com")
            try await json(schema("Membership"), "leave", "--couple", couple, "--user", "o@example.com")
            try await json(schema("[AuditEntry]"), "audit", "--couple", couple)
            // A refusal: one line on stderr, as the API writes its errors.
            let refused = try await rbac(["leave", "--couple", couple, "--user", "paul@example.com", "--json"])
            #expect(refused.status == 4)
            problems += checker.problems(
                try JSONDecoder().decode(JSONValue.self, from: Data(refused.stderr.utf8)), schema("Error"),
                at: "leave (the last owner)")

            @discardableResult
            func budget(_ expected: JSONValue, _ arguments: String...) async throws -> JSONValue {
                try await printed(expected, ["budget"] + arguments + ["--couple", couple])
            }
            let main = try id(try await budget(schema("Scenario"), "scenarios", "add", "Main", "--primary"))
            let other = try id(try await budget(schema("Scenario"), "scenarios", "clone", main, "--name", "Other"))
            try await budget(schema("Scenario"), "scenarios", "rename", other, "--name", "Plan B")
            try await budget(schema("Scenario"), "scenarios", "make-primary", main)
            try await budget(schema("[Scenario]"), "scenarios", "list")
            let folder = try id(try await budget(schema("Folder"), "folders", "add", "Party", "--scenario", main))
            try await budget(schema("Folder"), "folders", "rename", folder, "--name", "Reception")
            try await budget(schema("[Folder]"), "folders", "list", "--scenario", main)
            let venue = try id(
                try await budget(
                    schema("BudgetItem"), "items", "add", "Venue", "--scenario", main, "--budgeted", "5000",
                    "--folder", folder))
            let cake = try id(
                try await budget(schema("BudgetItem"), "items", "add", "Cake", "--scenario", main, "--budgeted", "0"))
            try await budget(schema("BudgetItem"), "items", "edit", cake, "--category", "Food")
            try await budget(schema("[BudgetItem]"), "items", "list", "--scenario", main)
            let deposit = try id(
                try await budget(
                    schema("Expense"), "expenses", "add", "Deposit", "--amount", "1200.50", "--due", "2027-05-01"))
            try await budget(schema("Expense"), "expenses", "edit", deposit, "--vendor", "Hall & Co")
            try await budget(
                schema("[Allocation]"), "expenses", "allocate", deposit, "--scenario", main, "--item", venue, "--item",
                cake)
            try await budget(schema("[Allocation]"), "items", "set-budget", cake, "--budgeted", "1000")
            try await budget(schema("[Allocation]"), "expenses", "set-amount", deposit, "--amount", "2000")
            try await budget(schema("[Expense]"), "expenses", "list")
            let payment = try id(try await budget(schema("Payment"), "payments", "add", deposit, "--amount", "2500"))
            try await budget(schema("[Payment]"), "payments", "list", "--expense", deposit)
            try await budget(schema("[PaymentStatus]"), "payments", "status")
            let gift = try id(
                try await budget(schema("Gift"), "gifts", "add", "Aunt", "--amount", "250", "--item", venue))
            try await budget(schema("Gift"), "gifts", "receive", gift)
            try await budget(schema("Gift"), "gifts", "edit", gift, "--no-item")
            try await budget(schema("[Gift]"), "gifts", "list")
            try await budget(
                try budgetAnswer("get", "/scenarios/{scenario}/categories"), "categories", "--scenario", main)
            try await budget(schema("BudgetOverview"), "overview", "--scenario", main)
            try await budget(try budgetAnswer("delete", "/payments/{payment}"), "payments", "delete", payment)
            try await budget(try budgetAnswer("delete", "/gifts/{gift}"), "gifts", "delete", gift)
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        }
    }
}
