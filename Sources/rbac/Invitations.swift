import ArgumentParser
import Budget
import Collaboration
import Foundation

/// An invitation's lifetime as people write it: 30m, 12h, 7d.
struct Lifetime: ExpressibleByArgument {
    let duration: Duration

    init?(argument: String) {
        guard let match = argument.wholeMatch(of: /(\d{1,6})([mhd])/), let count = Int(match.1) else { return nil }
        let unit: Int =
            switch match.2 {
            case "m": 60
            case "h": 3600
            default: 86_400
            }
        duration = .seconds(count * unit)
    }
}

struct IssuedReport: Encodable {
    let invitation: Invitation
    let token: String
    let link: String

    init(_ issued: IssuedInvitation) {
        invitation = issued.invitation
        token = issued.token.rawValue
        link = issued.link.absoluteString
    }
}

func printIssued(_ issued: IssuedInvitation, json: Bool) throws {
    if json { return try printJSON(IssuedReport(issued)) }
    let invitation = issued.invitation
    print(
        "Invitation \(invitation.id.uuidString.lowercased()) as \(invitation.role), expires \(invitation.expiresAt.iso8601)"
    )
    print("Link (shown once; only its hash is stored): \(issued.link.absoluteString)")
}

extension RBAC {
    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invite someone to a couple with a role; prints the link once.",
            discussion: "Links start with $RBAC_PUBLIC_URL (default http://localhost:8080).")
        @Option(help: "The couple's id.") var couple: String
        @Option(help: "The role the invitee will get.") var role: String
        @Option(help: "Only the user with this email address may accept.") var email: String?
        @Option(
            help: ArgumentHelp(
                "How long the link works: 30m, 12h, 7d (default 7d, at most 365d).", valueName: "lifetime"))
        var expires: Lifetime = Lifetime(argument: "7d")!
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            _ = try Parse.couple(couple)
            try Parse.role(role)
            if let email, EmailAddress(rawValue: email) == nil {
                throw ValidationError("\(quoted(email)) is not an email address")
            }
        }

        func run() async throws {
            try await CommandContext.run(database) { context in
                let issued = try await context.invitations.invite(
                    to: try Parse.couple(couple), role: try RoleName(validating: role),
                    email: email.flatMap(EmailAddress.init(rawValue:)), expiresIn: expires.duration,
                    as: try await context.actor(actor))
                try printIssued(issued, json: output.json)
            }
        }
    }

    struct Invitations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, revoke and resend a couple's invitations.",
            subcommands: [List.self, Revoke.self, Resend.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List invitations with their status.")
            @Option(help: "The couple's id.") var couple: String
            @Option(help: "Only pending, accepted, revoked or expired ones.") var status: String?
            @OptionGroup var page: PageOptions
            @OptionGroup var actor: ActorOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                if let status, InvitationStatus(rawValue: status) == nil {
                    throw ValidationError(
                        "unknown status \(quoted(status)); valid: pending, accepted, revoked, expired")
                }
            }

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let (coupleID, acting) = (try Parse.couple(couple), try await context.actor(actor))
                    let only = status.flatMap(InvitationStatus.init(rawValue:))
                    let invitations = try await page.read(id: \.id) {
                        try await context.invitations.invitations(of: coupleID, status: only, as: acting)
                    } page: { limit, after in
                        try await context.invitations.invitations(
                            of: coupleID, status: only, limit: limit, after: after, as: acting)
                    }
                    try output.print(
                        invitations,
                        Table(
                            headers: ["ID", "ROLE", "EMAIL", "FROM", "STATUS", "EXPIRES"],
                            rows: invitations.map {
                                [
                                    $0.id.uuidString.lowercased(), $0.role.rawValue, $0.email ?? "", $0.inviter,
                                    $0.status.rawValue, $0.expiresAt.iso8601,
                                ]
                            }
                        ).rendered)
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke a pending invitation.")
            @Option(help: "The couple's id.") var couple: String
            @Argument(help: "The invitation's id.") var invitation: String
            @OptionGroup var actor: ActorOptions
            @OptionGroup var database: DatabaseOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                _ = try Parse.id(invitation, "invitation")
            }

            func run() async throws {
                try await CommandContext.run(database) { context in
                    try await context.invitations.revoke(
                        try Parse.id(invitation, "invitation"), in: try Parse.couple(couple),
                        as: try await context.actor(actor))
                    print("Revoked invitation \(invitation.lowercased())")
                }
            }
        }

        struct Resend: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Revoke an invitation and issue a new link for the same role and email.")
            @Option(help: "The couple's id.") var couple: String
            @Argument(help: "The invitation's id.") var invitation: String
            @Option(help: ArgumentHelp("How long the new link works (default 7d).", valueName: "lifetime"))
            var expires: Lifetime = Lifetime(argument: "7d")!
            @OptionGroup var actor: ActorOptions
            @OptionGroup var database: DatabaseOptions
            @OptionGroup var output: OutputOptions

            func validate() throws {
                _ = try Parse.couple(couple)
                _ = try Parse.id(invitation, "invitation")
            }

            func run() async throws {
                try await CommandContext.run(database) { context in
                    let issued = try await context.invitations.resend(
                        try Parse.id(invitation, "invitation"), in: try Parse.couple(couple),
                        expiresIn: expires.duration,
                        as: try await context.actor(actor))
                    try printIssued(issued, json: output.json)
                }
            }
        }
    }

    struct Redeem: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Accept an invitation token for a user.")
        @Argument(help: "The token (inv_...) or the whole link.") var token: String
        @Option(help: "The user who accepts (id or email).") var user: String
        @OptionGroup var label: OperatorLabelOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws { try Parse.user(user) }

        func run() async throws {
            try await CommandContext.run(database, operatorLabel: label.recorded) { context in
                let accepter = try await context.user(user)
                // A pasted link works too: the token is its last path component.
                let text = token.split(separator: "/").last.map(String.init) ?? token
                let membership = try await context.invitations.accept(
                    token: text, user: accepter.id, as: .operator(label: label.recorded))
                try output.print(
                    membership,
                    "\(accepter.email) joined couple \(membership.coupleID.uuidString.lowercased()) as \(membership.role)"
                )
            }
        }
    }

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read a couple's audit log, or the operator's, oldest first.",
            discussion: """
                A couple's log holds its membership, invitation and budget changes. The operator's log (--operator) \
                holds the changes that belong to no couple: the access policy (roles, permissions, grants), service \
                keys (never their hashes), budget row limits and users, each with the OS user or label that made it.
                """)
        @Option(help: "The couple's id.") var couple: String?
        @Flag(help: "Read the operator's log instead of a couple's.") var `operator` = false
        @Option(help: "Only entries at or after this time (ISO 8601, e.g. 2026-11-22T10:00:00Z).") var since: String?
        @Option(help: ArgumentHelp("Only the newest n entries (still oldest first).", valueName: "n")) var tail: Int?
        @OptionGroup var actor: ActorOptions
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var output: OutputOptions

        func validate() throws {
            switch (couple, `operator`) {
            case (let couple?, false): _ = try Parse.couple(couple)
            case (nil, true):
                if actor.actor != nil { throw ValidationError("--actor does not apply to the operator's log") }
            case (_?, true): throw ValidationError("give --couple or --operator, not both")
            case (nil, false): throw ValidationError("give --couple C for a couple's log, or --operator")
            }
            if let since, (try? Date(since, strategy: .iso8601)) == nil {
                throw ValidationError("\(quoted(since)) is not an ISO 8601 time such as 2026-11-22T10:00:00Z")
            }
            if let tail, tail < 1 { throw ValidationError("--tail must be at least 1, not \(tail)") }
        }

        func run() async throws {
            try await CommandContext.run(database) { context in
                let since = try since.map { try Date($0, strategy: .iso8601) }
                let entries =
                    if let couple {
                        try await context.repository.audit(
                            couple: try Parse.couple(couple), since: since, last: tail,
                            as: try await context.actor(actor))
                    } else {
                        try await context.repository.operatorAudit(since: since, last: tail)
                    }
                try output.print(
                    entries,
                    Table(
                        headers: ["AT", "ACTOR", "ACTION", "CHANGE"],
                        rows: entries.map { [$0.at.iso8601, $0.actor, $0.action, Self.change($0)] }
                    ).rendered)
            }
        }

        /// A one-line summary of what changed, over the fields people look for: each one's value in a row added
        /// or removed; for an update, the fields that name the row, then the old and new values of those it
        /// changed.
        static func change(_ entry: AuditEntry) -> String {
            func fields(_ json: String?) -> [String: String]? {
                guard let json, let row = try? JSONDecoder().decode([String: Scalar].self, from: Data(json.utf8))
                else { return nil }
                var fields = row.compactMapValues(\.text)
                for key in ["amount", "budgeted"] {
                    if let amount = fields[key].flatMap({ Decimal(string: $0) }) { fields[key] = Money.text(amount) }
                }
                return fields
            }
            let keys = [
                "user_id", "role", "status", "email", "display_name", "accepted_by", "revoked_at", "name", "from_name",
                "expense_id", "budget_item_id", "amount", "budgeted", "received", "paid_at", "is_primary", "permission",
                "grantable_role", "rank", "table_name", "max_rows",
            ]
            switch (fields(entry.before), fields(entry.after)) {
            case (let before?, let after?):
                let naming = ["table_name", "name", "user_id"].compactMap { key in
                    before[key].flatMap { $0 == after[key] ? "\(key)=\($0)" : nil }
                }
                let changed = keys.compactMap { key in
                    before[key] == after[key] ? nil : "\(key) \(before[key] ?? "null")→\(after[key] ?? "null")"
                }
                return (naming + changed).joined(separator: " ")
            case (let row?, nil), (nil, let row?):
                return keys.compactMap { key in row[key].map { "\(key)=\($0)" } }.joined(separator: " ")
            case (nil, nil):
                return ""
            }
        }

        /// A value of an audited row, as text (nil for null, or for an array or object).
        private struct Scalar: Decodable {
            let text: String?

            init(from decoder: any Decoder) throws {
                let value = try decoder.singleValueContainer()
                if value.decodeNil() {
                    text = nil
                } else if let flag = try? value.decode(Bool.self) {
                    text = String(flag)
                } else if let number = try? value.decode(Decimal.self) {
                    text = "\(number)"
                } else {
                    text = try? value.decode(String.self)
                }
            }
        }
    }
}
