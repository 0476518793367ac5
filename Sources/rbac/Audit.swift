import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC {
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
