import Collaboration
import Foundation
import HTTPTypes
import Hummingbird

/// The JSON API for backend services under `/v1`, behind a service API key. Backends act as the operator,
/// recorded under their key's name.
struct PermissionAPIController {
    let repository: any CollaborationRepository
    let checker: PermissionChecker
    let permissions: CollaborationPermissionService
    let memberships: MembershipService

    static let maxBatch = 100

    func addRoutes(to group: RouterGroup<AppRequestContext>) {
        group.post("check", use: check)
        group.post("check/batch", use: checkBatch)
        group.get("users", use: users)
        group.get("users/:user", use: user)
        group.get("users/:user/couples", use: userCouples)
        group.get("couples/:couple/members", use: members)
        group.get("couples/:couple/users/:user/permissions", use: userPermissions)
    }

    struct CheckRequest: Decodable {
        let coupleID: String
        let userID: String
        let permission: String
        /// Answer no staler than this couple revision (one a write returned).
        let minRevision: Int64?

        enum CodingKeys: String, CodingKey {
            case coupleID = "couple_id"
            case userID = "user_id"
            case permission
            case minRevision = "min_revision"
        }
    }

    /// The hottest route: its body is scanned directly when it has the usual shape, and its answer is written
    /// without JSONEncoder; both give what the Codable path gives (CheckRequestScannerTests).
    @Sendable func check(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: context.maxUploadSize)
        let check =
            if let scanned = CheckRequest(scanning: body) {
                scanned
            } else {
                try await request.decode(as: CheckRequest.self, context: context)
            }
        return CheckAnswer.response(try await answer(check))
    }

    @Sendable func checkBatch(_ request: Request, context: AppRequestContext) async throws -> Response {
        struct Batch: Decodable { let checks: [CheckRequest] }
        struct Results: Encodable { let results: [PermissionCheck] }
        let batch = try await request.decode(as: Batch.self, context: context)
        guard (1...Self.maxBatch).contains(batch.checks.count) else {
            throw APIError.badRequest("a batch holds 1 to \(Self.maxBatch) checks, not \(batch.checks.count)")
        }
        // Validate every check before asking the database about any; then ask about all at once, so that those
        // the cache cannot answer are read together (PostgresCollaborationRepository batches concurrent reads).
        let parsed = try batch.checks.map(Self.parse)
        try await checker.requireKnown(parsed.map(\.permission))
        let results = try await withThrowingTaskGroup(of: (Int, PermissionCheck).self) { group in
            for (index, check) in parsed.enumerated() {
                group.addTask { (index, try await answer(check)) }
            }
            // Every slot is filled, or the whole batch fails; a slot starts as a denial all the same.
            var results = Array(repeating: PermissionCheck(allowed: false, revision: nil), count: parsed.count)
            for try await (index, result) in group { results[index] = result }
            return results
        }
        return try Self.json(Results(results: results))
    }

    /// A user with their identities, for a backend that heard of them by id (a webhook, a member listing).
    @Sendable func user(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try APIError.uuid(context.parameters.get("user"), "user id")
        return try Self.json(try await repository.user(.id(user)))
    }

    /// Users by address, a page at a time; with `search`, those whose address or display name contains it (or
    /// begins with it: `User.matches`), whatever its case: for a backend that looks for someone it has heard of
    /// by name, as `rbac users list`.
    @Sendable func users(_ request: Request, context: AppRequestContext) async throws -> Response {
        let page = try Self.page(request, keyedBy: String.self)
        let users = try await repository.users(
            matching: try request.queryParameter("search"), limit: page.limit, after: page.after)
        return try Self.json(Page("users", users, limit: page.limit))
    }

    @Sendable func userCouples(_ request: Request, context: AppRequestContext) async throws -> Response {
        let user = try APIError.uuid(context.parameters.get("user"), "user id")
        let page = try Self.page(request, keyedBy: Date.self)
        let couples = try await repository.userCouples(
            user, limit: page.limit, after: page.after, as: actor(context))
        return try Self.json(Page("couples", couples, limit: page.limit))
    }

    @Sendable func members(_ request: Request, context: AppRequestContext) async throws -> Response {
        let couple = try APIError.uuid(context.parameters.get("couple"), "couple id")
        let page = try Self.page(request, keyedBy: Date.self)
        let members = try await memberships.members(
            of: couple, limit: page.limit, after: page.after, as: actor(context))
        return try Self.json(Page("members", members, limit: page.limit))
    }

    @Sendable func userPermissions(_ request: Request, context: AppRequestContext) async throws -> Response {
        let couple = try APIError.uuid(context.parameters.get("couple"), "couple id")
        let user = try APIError.uuid(context.parameters.get("user"), "user id")
        let actor = actor(context)
        let role = try await permissions.role(user: user, couple: couple, as: actor)
        let granted = try await permissions.permissions(user: user, couple: couple, as: actor)
        struct Standing: Encodable {
            let role: RoleName?
            let permissions: [Permission]
        }
        return try Self.json(Standing(role: role, permissions: granted))
    }

    struct ParsedCheck {
        let couple: UUID
        let user: UUID
        let permission: Permission
        let minRevision: Int64?
    }

    private func answer(_ check: CheckRequest) async throws -> PermissionCheck {
        let parsed = try Self.parse(check)
        return try await checker.checkKnown(
            couple: parsed.couple, user: parsed.user, permission: parsed.permission, minRevision: parsed.minRevision)
    }

    private func answer(_ check: ParsedCheck) async throws -> PermissionCheck {
        try await checker.check(
            couple: check.couple, user: check.user, permission: check.permission, minRevision: check.minRevision)
    }

    static func parse(_ check: CheckRequest) throws -> ParsedCheck {
        let permission = try Permission(validating: check.permission)
        if let minRevision = check.minRevision, minRevision < 0 {
            throw APIError.badRequest("min_revision must not be negative")
        }
        return ParsedCheck(
            couple: try APIError.uuid(check.coupleID, "couple_id"), user: try APIError.uuid(check.userID, "user_id"),
            permission: permission, minRevision: check.minRevision)
    }

    private func actor(_ context: AppRequestContext) -> Actor {
        .operator(label: "key:\(context.serviceKey?.name ?? "unknown")")
    }

    /// A listing's page: `limit` (1 to 1000, 100 when absent) rows after `after` (the previous page's
    /// `next_after`, or an id).
    static func page<Key: PlaceKey>(_ request: Request, keyedBy key: Key.Type) throws -> PageRequest<Key> {
        try pageAsked(request, keyedBy: key) ?? PageRequest(limit: 100, after: nil)
    }

    /// `page`, or nil when the request names neither `limit` nor `after`: for a listing that is whole unless a
    /// page is asked for.
    static func pageAsked<Key: PlaceKey>(_ request: Request, keyedBy: Key.Type) throws -> PageRequest<Key>? {
        let limit = try limit(request)
        let after = try request.queryParameter("after").map {
            guard let cursor = PageCursor<Key>(text: $0) else {
                throw APIError.badRequest("after must be the next_after of the page before, or an id")
            }
            return cursor
        }
        guard limit != nil || after != nil else { return nil }
        return PageRequest(limit: limit ?? 100, after: after)
    }

    private static func limit(_ request: Request) throws -> Int? {
        try request.queryNumber("limit", in: 1...1000, "a number from 1 to 1000")
    }

    /// One page of a listing, `{"<name>": [...], "next_after": ...}`: `next_after`, where the last item is
    /// (its cursor's text), only when the page is full (there may be more); a client passes it back as `after`.
    struct Page<Item: Encodable & ListedRow>: Encodable where Item.OrderKey: PlaceKey {
        let name: String
        let items: [Item]
        let nextAfter: String?

        init(_ name: String, _ items: [Item], limit: Int) {
            self.name = name
            self.items = items
            nextAfter = items.count == limit ? items.last?.cursor.text : nil
        }

        private struct Key: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(items, forKey: Key(stringValue: name))
            try container.encodeIfPresent(nextAfter, forKey: Key(stringValue: "next_after"))
        }
    }

    /// One encoder for every response, written as the CLI's `--json` writes.
    static let encoder = JSONEncoder.rbac()

    static func json(_ value: some Encodable) throws -> Response {
        response(json: ByteBuffer(bytes: try encoder.encode(value)))
    }

    static let jsonContentType = "application/json; charset=utf-8"

    /// The fields of every answer about a couple, a user or an invitation, which is about them as of now: a cache
    /// that kept it would answer the next asker with stale or someone else's permissions, and a browser must not
    /// read it as anything but its type.
    static let privateFields: HTTPFields = [.cacheControl: "no-store", .xContentTypeOptions: "nosniff"]

    /// The fields of every JSON answer, before Hummingbird adds `Content-Length`, `Date` and `Server`.
    static let jsonFields = privateFields + [HTTPField(name: .contentType, value: jsonContentType)]

    static func response(json body: ByteBuffer) -> Response {
        Response(status: .ok, headers: jsonFields, body: .init(byteBuffer: body))
    }
}

/// Authenticates `/v1` requests with `Authorization: Bearer rbk_...`; anything else is 401. If the keys cannot
/// be checked, the request fails with 503: never through.
struct ServiceKeyMiddleware: RouterMiddleware {
    let keys: ServiceKeyService

    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        // A check the fast path handed on because the database did not answer it (its key was known then): looking
        // the key up again would wait a second time for a database that is down or unreachable.
        guard request.headers[CheckAnswer.unavailable] == nil else { throw APIError.unavailable }
        guard let credential = request.headers.bearerCredential, let key = try await keys.authenticate(credential)
        else {
            throw APIError.unauthorized
        }
        var context = context
        context.serviceKey = key
        return try await next(request, context)
    }
}
