import Budget
import Collaboration
import Foundation
import Hummingbird
import HummingbirdTesting
import Identity
import InMemoryRepositories
import Storage
import Testing

@testable import Server

@Suite("OpenAPI document")
struct OpenAPITests {
    @Test("every route in the router is in the document, with its method, and nothing else is")
    func everyRouteDocumented() async throws {
        let fixture = try await Fixture()
        let router = documentedRoutes(
            ServerDependencies(
                repository: fixture.repository, keys: fixture.keys, tokens: fixture.tokens,
                publicBaseURL: URL(string: "https://rbac.test")!, budgets: InMemoryBudgetRepository(),
                isReady: { true }))
        let document = try #require(try JSONSerialization.jsonObject(with: try openAPIDocument()) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let documented = Set(paths.flatMap { path, operations in operations.keys.map { "\($0.uppercased()) \(path)" } })
        // The router writes parameters as :name; OpenAPI as {name}.
        let routed = Set(
            router.routes.map { route in
                let path = route.path.description.split(separator: "/").map {
                    $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0)
                }
                return "\(route.method) /\(path.joined(separator: "/"))"
            })
        #expect(
            routed.subtracting(documented).isEmpty,
            "routes missing from openapi.json: \(routed.subtracting(documented))")
        #expect(
            documented.subtracting(routed).isEmpty,
            "documented routes that do not exist: \(documented.subtracting(routed))")
    }

    /// Each operation the document lists: its method (lower case), its path, and what the document says of it.
    static func operations() throws -> [(method: String, path: String, operation: [String: Any])] {
        let document = try #require(try JSONSerialization.jsonObject(with: try openAPIDocument()) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: [String: Any]]])
        return paths.flatMap { path, operations in operations.map { ($0.key, path, $0.value) } }
            .sorted { ($0.path, $0.method) < ($1.path, $1.method) }
    }

    /// A documented path (`/v1/couples/{couple}`) with a new id for each parameter.
    static func uri(_ path: Substring) -> String {
        "/"
            + path.split(separator: "/").map { $0.hasPrefix("{") ? UUID().uuidString : String($0) }
            .joined(separator: "/")
    }

    @Test("every JSON write documents 415, and every operation that takes a body documents 413")
    func refusalsDocumented() throws {
        for (method, path, operation) in try Self.operations() {
            let statuses = Set((operation["responses"] as? [String: Any] ?? [:]).keys)
            if path.hasPrefix("/v1/") && ["post", "put", "patch"].contains(method) {
                #expect(statuses.contains("415"), "\(method) \(path)")
            }
            if operation["requestBody"] != nil {
                #expect(statuses.contains("413"), "\(method) \(path)")
            }
        }
    }

    @Test("every documented JSON body refuses a key it does not document with 400, at any depth, naming it")
    func undocumentedKeysRefused() async throws {
        let bodies = try Self.operations().compactMap { method, path, operation in
            let content = (operation["requestBody"] as? [String: Any])?["content"] as? [String: Any]
            return content?["application/json"] == nil ? nil : "\(method.uppercased()) \(path)"
        }
        #expect(Set(DocumentedRequests.operations.filter { $0.value.body != nil }.keys) == Set(bodies))
        let fixture = try await Fixture()
        try await fixture.application().test(.router) { client in
            for operation in bodies {
                guard case .object = DocumentedRequests.operations[operation]?.body?.kind else {
                    Issue.record("\(operation): its body is not an object of documented keys")
                    continue
                }
                let parts = operation.split(separator: " ")
                // Any ids: the body is read before they are looked up.
                try await client.execute(
                    uri: Self.uri(parts[1]), method: HTTPRequest.Method(String(parts[0]))!,
                    headers: fixture.keyHeader(for: operation),
                    body: ByteBuffer(string: #"{"zz_undocumented": 1}"#)
                ) { response in
                    #expect(response.status == .badRequest, "\(operation)")
                    #expect(
                        String(buffer: response.body).contains(#"the body names \"zz_undocumented\""#), "\(operation)")
                }
            }
            let check = #"{"couple_id":"\#(fixture.couple)","user_id":"\#(fixture.owner)","permission":"budget.edit""#
            try await client.execute(
                uri: "/v1/check/batch", method: .post, headers: fixture.keyHeader,
                body: ByteBuffer(string: #"{"checks":[\#(check)},\#(check),"minRevision":1}]}"#)
            ) { response in
                #expect(response.status == .badRequest)
                #expect(
                    String(buffer: response.body).contains(
                        #"checks[1] names \"minRevision\", which this request does not take; it takes couple_id, "#
                            + "min_revision, permission, user_id"))
            }
            try await client.execute(
                uri: "/v1/check/batch", method: .post, headers: fixture.keyHeader,
                body: ByteBuffer(string: #"{"checks":[\#(check)}]}"#)
            ) { response in
                #expect(response.status == .ok, "the documented keys alone are read as before")
            }
        }
    }

    @Test("every documented JSON body refuses null for an optional key whose schema takes none; takes it elsewhere")
    func undocumentedNullsRefused() async throws {
        // Each documented key of each operation's body: `METHOD /path key`, whether it may be null, whether required.
        var documented: [(key: String, nullable: Bool, required: Bool)] = []
        for (operation, taken) in DocumentedRequests.operations {
            guard case .object(let shapes, let required)? = taken.body?.kind else { continue }
            for (key, shape) in shapes {
                documented.append(("\(operation) \(key)", shape.nullable, required.contains(key)))
            }
        }
        let keys = documented.sorted { $0.key < $1.key }
        let fixture = try await Fixture()
        try await fixture.application().test(.router) { client in
            for (documentedKey, nullable, required) in keys {
                let parts = documentedKey.split(separator: " ")
                let (operation, key) = ("\(parts[0]) \(parts[1])", parts[2])
                // Any ids: the body is read before they are looked up.
                try await client.execute(
                    uri: Self.uri(parts[1]), method: HTTPRequest.Method(String(parts[0]))!,
                    headers: fixture.keyHeader(for: operation), body: ByteBuffer(string: #"{"\#(key)": null}"#)
                ) { response in
                    let body = String(buffer: response.body)
                    if nullable {
                        #expect(!body.contains("must not be null"), "\(operation) \(key): \(body)")
                    } else if required {
                        // Its decoder's refusal, which says what it must be (or names another key it lacks).
                        #expect(response.status == .badRequest, "\(operation) \(key): \(body)")
                    } else {
                        #expect(response.status == .badRequest, "\(operation) \(key)")
                        #expect(
                            body.contains(#""\#(key) must not be null; leave it out instead""#),
                            "\(operation) \(key): \(body)")
                    }
                }
            }
            try await client.execute(
                uri: "/v1/couples/\(fixture.couple)", method: .patch,
                headers: fixture.keyHeader(actingAs: fixture.owner), body: ByteBuffer(string: #"{"name": null}"#)
            ) { response in
                #expect(response.status == .badRequest)
            }
        }
        #expect(
            try await fixture.repository.coupleDetail(fixture.couple, as: .operator(label: "tests")).couple.name
                == "Olivia & Paul <3")
        // What the document lets be null: a check's revision, and what an edit clears with it.
        #expect(
            Set(keys.filter(\.nullable).map(\.key)) == [
                "POST /v1/check min_revision", "PATCH /v1/users/{user} display_name",
                "PATCH /v1/couples/{couple}/budget/items/{item} folder_id",
                "PATCH /v1/couples/{couple}/budget/expenses/{expense} due_date",
                "PATCH /v1/couples/{couple}/budget/gifts/{gift} budget_item_id",
            ])
    }

    /// The schema each kind of key in a request body refers to: `name` and `from` are names (a role's name is a
    /// role name), `amounts` and `permissions` list what `amount` and `permission` are.
    static let keyKinds: [String: String] = [
        "name": "Name", "from": "Name", "category": "Label", "event": "Label", "vendor": "Vendor",
        "amount": "Amount", "budgeted": "Amount", "amounts": "Amount", "role": "RoleName",
        "permission": "Permission", "permissions": "Permission",
    ]

    @Test("every name, label, amount, role and permission a body or parameter takes refers to its one schema")
    func bodyKeysShareSchemas() throws {
        let schemas = try Self.schemas()
        var seen: Set<String> = []
        for (method, path, operation) in try Self.operations() {
            // A role named in the path or the query (`reassign` names the role that replaces it).
            for case let parameter as [String: Any] in operation["parameters"] as? [Any] ?? [] {
                guard let name = parameter["name"] as? String, ["role", "reassign"].contains(name) else { continue }
                #expect(
                    (parameter["schema"] as? [String: Any])?["$ref"] as? String == "#/components/schemas/RoleName",
                    "\(method) \(path) \(name)")
            }
            let content = (operation["requestBody"] as? [String: Any])?["content"] as? [String: Any]
            guard var schema = (content?["application/json"] as? [String: Any])?["schema"] as? [String: Any] else {
                continue
            }
            if let reference = schema["$ref"] as? String {
                schema = try #require(schemas[String(reference.split(separator: "/").last!)])
            }
            for case (let key, var property as [String: Any]) in schema["properties"] as? [String: Any] ?? [:] {
                guard var kind = Self.keyKinds[key] else { continue }
                if key == "name" && path.hasSuffix("/roles") { kind = "RoleName" }
                if let items = property["items"] as? [String: Any] { property = items }
                #expect(
                    property["$ref"] as? String == "#/components/schemas/\(kind)", "\(method) \(path) \(key)")
                seen.insert(kind)
            }
        }
        #expect(seen == Set(Self.keyKinds.values))
    }

    @Test("the limits the document gives names, labels, amounts, roles and permissions are the service's")
    func documentedLimits() async throws {
        let schemas = try Self.schemas()
        func limit(_ schema: String, _ key: String) throws -> Int { try #require(schemas[schema]?[key] as? Int) }
        @Sendable func text(_ length: Int) -> String { String(repeating: "n", count: length) }

        let (shortest, longest) = (try limit("Name", "minLength"), try limit("Name", "maxLength"))
        #expect((try? validatedName(text(shortest), "name")) != nil)
        #expect((try? validatedName(text(longest), "name")) != nil)
        #expect((try? validatedName(text(shortest - 1), "name")) == nil)
        #expect((try? validatedName(text(longest + 1), "name")) == nil)

        let roleName = try limit("RoleName", "maxLength")
        #expect(RoleName(rawValue: text(roleName)) != nil && RoleName(rawValue: text(roleName + 1)) == nil)
        let permission = try limit("Permission", "maxLength")
        #expect(Permission(rawValue: "a." + text(permission - 2)) != nil)
        #expect(Permission(rawValue: "a." + text(permission - 1)) == nil)
        #expect(schemas["RoleName"]?["pattern"] as? String == "^[a-z][a-z_]*$")
        #expect(schemas["Permission"]?["pattern"] as? String == #"^[a-z][a-z_]*\.[a-z][a-z_]*$"#)

        // JSONSerialization reads the bounds as doubles; their shortest text is what the document says.
        let amount = try #require(schemas["Amount"])
        let (minimum, maximum) = try (
            #require(Decimal(string: (amount["minimum"] as? NSNumber)?.stringValue ?? "")),
            #require(Decimal(string: (amount["maximum"] as? NSNumber)?.stringValue ?? ""))
        )
        #expect(maximum == Money.maximum && minimum == 0)
        let cent = Decimal(string: "0.01")!
        #expect((try? Money.validated(maximum, "amount")) != nil && (try? Money.validated(minimum, "amount")) != nil)
        #expect((try? Money.validated(maximum + cent, "amount")) == nil)
        #expect((try? Money.validated(minimum - cent, "amount")) == nil)

        // Labels and vendors are kept as sent, so only their routes can tell their limits.
        let (label, vendor) = (try limit("Label", "maxLength"), try limit("Vendor", "maxLength"))
        let fixture = try await Fixture()
        try await fixture.application().test(.router) { client in
            for (category, vendor, status) in [
                (label, vendor, HTTPResponse.Status.created), (label + 1, vendor, .badRequest),
                (label, vendor + 1, .badRequest),
            ] {
                let body = #"{"name":"Band","amount":1,"category":"\#(text(category))","vendor":"\#(text(vendor))"}"#
                try await client.execute(
                    uri: "/v1/couples/\(fixture.couple)/budget/expenses", method: .post,
                    headers: fixture.keyHeader(actingAs: fixture.owner), body: ByteBuffer(string: body)
                ) { response in
                    #expect(response.status == status, "category \(category), vendor \(vendor)")
                }
            }
        }
    }

    @Test("the one pattern the document gives for text people write is the service's rule, scalar by scalar")
    func documentedTextPattern() throws {
        var patterns: Set<String> = []
        func collect(_ value: Any) {
            if let object = value as? [String: Any] {
                // A key programs make (`idempotencyKeyPattern`), not text people write.
                guard object["name"] as? String != "Idempotency-Key" else { return }
                if let pattern = object["pattern"] as? String, !pattern.contains("a-z") { patterns.insert(pattern) }
                object.values.forEach(collect)
            } else if let array = value as? [Any] {
                array.forEach(collect)
            }
        }
        collect(try JSONSerialization.jsonObject(with: try openAPIDocument()))
        let schemas = try Self.schemas()
        #expect(patterns.count == 1, "\(patterns)")
        let pattern = try #require(patterns.first)
        #expect(["Name", "Label", "Vendor"].allSatisfy { schemas[$0]?["pattern"] as? String == pattern })
        let expression = try NSRegularExpression(pattern: pattern)
        // Every scalar of the Basic Multilingual Plane's first 12,288, where the controls and overrides lie.
        for value in UInt32(1)..<0x3000 {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "a\(Character(scalar))b"
            let matched = expression.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
            #expect(matched == !containsControlCharacter(text), "U+\(String(value, radix: 16))")
        }
    }

    @Test("the pattern the document gives Idempotency-Key is the service's rule, byte by byte, and so is its length")
    func idempotencyKeyPattern() throws {
        let document = try #require(try JSONSerialization.jsonObject(with: try openAPIDocument()) as? [String: Any])
        let parameters = try #require((document["components"] as? [String: Any])?["parameters"] as? [String: Any])
        let schema = try #require((parameters["idempotencyKey"] as? [String: Any])?["schema"] as? [String: Any])
        let expression = try NSRegularExpression(pattern: try #require(schema["pattern"] as? String))
        let lengths = try #require(schema["minLength"] as? Int)...(try #require(schema["maxLength"] as? Int))
        // As JSON Schema reads it (ECMA-262), `$` is the end of the text; ICU's also matches before a last newline.
        func documented(_ key: String) -> Bool {
            let whole = NSRange(key.startIndex..., in: key)
            return expression.firstMatch(in: key, range: whole)?.range == whole && lengths.contains(key.count)
        }
        for value in UInt32(0)..<0x100 {
            let key = "k\(Character(Unicode.Scalar(value)!))"
            #expect(documented(key) == IdempotencyMiddleware.takes(key), "U+\(String(value, radix: 16))")
        }
        for key in ["", "k", String(repeating: "k", count: 255), String(repeating: "k", count: 256)] {
            #expect(documented(key) == IdempotencyMiddleware.takes(key), "\(key.count) characters")
        }
    }

    /// The document's `components.schemas`.
    static func schemas() throws -> [String: [String: Any]] {
        let document = try #require(try JSONSerialization.jsonObject(with: try openAPIDocument()) as? [String: Any])
        return try #require((document["components"] as? [String: Any])?["schemas"] as? [String: [String: Any]])
    }

    @Test("every route taking a service key refuses a query parameter it does not document with 400, naming it")
    func undocumentedQueryRefused() async throws {
        let keyed = try Self.operations().compactMap { method, path, operation in
            "\(operation["security"] ?? "")".contains("serviceKey") ? (method, path) : nil
        }
        #expect(keyed.count > 50)
        let fixture = try await Fixture()
        try await fixture.application().test(.router) { client in
            for (method, path) in keyed {
                let taken = try #require(DocumentedRequests.operations["\(method.uppercased()) \(path)"]?.query)
                // Any ids, and the documented parameters with any values: the query is read before either.
                let query = (taken.sorted() + ["zz_undocumented"]).map { "\($0)=1" }.joined(separator: "&")
                try await client.execute(
                    uri: "\(Self.uri(path[...]))?\(query)", method: HTTPRequest.Method(method.uppercased())!,
                    headers: fixture.keyHeader(for: "\(method.uppercased()) \(path)")
                ) { response in
                    #expect(response.status == .badRequest, "\(method) \(path)")
                    #expect(
                        String(buffer: response.body).contains(#"the query names \"zz_undocumented\""#),
                        "\(method) \(path): \(String(buffer: response.body))")
                }
            }
            // Names are read percent-decoded, as the routes read them.
            try await client.execute(
                uri: "/v1/users?%73earch=pia&%73erch=pia", method: .get, headers: fixture.keyHeader
            ) { response in
                #expect(response.status == .badRequest)
                #expect(
                    String(buffer: response.body).contains(
                        #"the query names \"serch\", which this request does not take; it takes after, limit, search"#))
            }
        }
    }

    @Test("the document is served at /openapi.json")
    func served() async throws {
        let fixture = try await Fixture()
        try await fixture.application().test(.router) { client in
            try await client.execute(uri: "/openapi.json", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body).contains("\"openapi\": \"3.1.0\""))
            }
        }
    }

    @Test("the error codes listed are exactly those the API answers with: the domains' refusals and its own")
    func errorCodesDocumented() throws {
        let error = (try Self.schemas()["Error"]?["properties"] as? [String: Any])?["error"]
        let code = ((error as? [String: Any])?["properties"] as? [String: Any])?["code"] as? [String: Any]
        let listed = try #require(code?["enum"] as? [String])
        let refusals = Set(CollaborationErrorCode.allCases.map(\.rawValue))
        #expect(Set(listed) == refusals.union(APIError.Code.allCases.map(\.rawValue)))
        #expect(listed == listed.sorted() && Set(listed).count == listed.count)
        // A budget refusal reaches the API under the collaboration code of its name; without one, it would
        // become invalid_input.
        #expect(Set(BudgetErrorCode.allCases.map(\.rawValue)).isSubset(of: refusals))
    }

    @Test("the webhooks section documents exactly the events the outbox carries")
    func webhooksDocumented() throws {
        let document = try JSONSerialization.jsonObject(with: try openAPIDocument()) as? [String: Any]
        let webhooks = try #require(document?["webhooks"] as? [String: Any])
        #expect(Set(webhooks.keys) == Set(PostgresOutbox.eventTypes))
    }
}
