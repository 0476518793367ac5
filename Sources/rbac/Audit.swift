import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC {
    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read a couple's audit log, or the operator's, oldest first.",
            discussion: """
                A couple's log holds its membership, invitation and budget changes, its own roles, and changes to \
                the couple itself (its name, the domains it may invite). The operator's log (--operator) holds the \
                changes that belong to no couple: the access policy (roles, permissions, grants), service keys \
                (never their hashes), budget row limits, the invitation limit, users, identities and webhooks, each \
                with the OS user or label that made it. Each line shows what changed; --json prints each row before \
                and after whole. With --tail, the page before the one shown is --before the first entry's id, which \
                stderr names while older entries remain (with --json, one line: {"next_before": ID}).

                Example: rbac audit --couple C --since 2026-11-22T10:00:00Z --tail 20
                """)
        @Option(help: "The couple's id.") var couple: String?
        @Flag(help: "Read the operator's log instead of a couple's.") var `operator` = false
        @Option(
            help: ArgumentHelp("Only entries from this instant on: 2026-11-22T10:00Z, or a date.", valueName: "instant")
        )
        var since: Instant?
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("Only the newest n entries (still oldest first).", valueName: "n")) var tail: Int?
        @Option(
            parsing: .unconditional, help: ArgumentHelp("Only entries older than this one (its ID).", valueName: "id"))
        var before: Int64?
        @OptionGroup var acting: ActingOptions

        func validate() throws {
            switch (couple, `operator`) {
            case (let couple?, false): _ = try Parse.couple(couple)
            case (nil, true):
                if acting.actor != nil { throw ValidationError("--actor does not apply to the operator's log") }
            case (_?, true): throw ValidationError("give --couple or --operator, not both")
            case (nil, false): throw ValidationError("give --couple C for a couple's log, or --operator")
            }
            if let tail, tail < 1 { throw ValidationError("--tail must be at least 1, not \(tail)") }
            if let before, before < 1 { throw ValidationError("--before must be an entry's id, not \(before)") }
            _ = try since?.date("--since")
        }

        func run() async throws {
            try await acting.run { context, actor in
                let since = try since?.date("--since")
                if couple == nil, tail == nil {
                    // Every entry of a log that grows with every user made: printed as it is read.
                    var printer = ListingPrinter(json: acting.output.json, columns: Self.columns)
                    try await forEachPage(id: \.id) { limit, after in
                        try await context.repository.operatorAudit(
                            since: since, before: before, after: after, limit: limit)
                    } each: {
                        try printer.print($0)
                    }
                    return try printer.finish()
                }
                let (entries, nextBefore) = try await AuditEntry.page(last: tail) { last in
                    if let couple {
                        try await context.repository.audit(
                            couple: try Parse.couple(couple), since: since, before: before, last: last,
                            as: actor)
                    } else {
                        try await context.repository.operatorAudit(since: since, before: before, last: last)
                    }
                }
                if let nextBefore {
                    printNote(
                        json: acting.output.json, "older entries remain: --before \(nextBefore)", "next_before",
                        nextBefore)
                }
                try acting.output.print(entries, Self.columns.table(entries).rendered)
            }
        }

        static let columns = Columns<AuditEntry>(headers: ["ID", "AT", "ACTOR", "ACTION", "CHANGE"]) {
            [String($0.id), $0.at.iso8601, $0.actor, $0.action, change($0)]
        }

        /// A one-line summary of what changed: each field of a row added or removed that holds a value; for an
        /// update, the fields that name the row, then the old and new values of those it changed. Every column
        /// shows but the bookkeeping ones (`hidden`), so that a column a release adds is not left out.
        static func change(_ entry: AuditEntry) -> String {
            switch (entry.before, entry.after) {
            case (let before?, let after?):
                let naming = ["table_name", "name", "user_id"].compactMap { key in
                    before[key].flatMap { $0 == after[key] ? "\(key)=\(text($0, key))" : nil }
                }
                let changed = shown(Set(before.keys).union(after.keys)).compactMap { key in
                    before[key] == after[key]
                        ? nil : "\(key) \(text(before[key] ?? .null, key))→\(text(after[key] ?? .null, key))"
                }
                return (naming + changed).joined(separator: " ")
            case (let row?, nil), (nil, let row?):
                let fields: [String] = shown(Set(row.keys)).compactMap { key in
                    guard let value = row[key], ![.null, .string(""), .array([])].contains(value) else { return nil }
                    return "\(key)=\(text(value, key))"
                }
                // A row with nothing else to show (a deleted user, erased of their address) shows its id.
                guard fields.isEmpty, let id = row["id"] else { return fields.joined(separator: " ") }
                return "id=\(text(id, "id"))"
            case (nil, nil):
                return ""
            }
        }

        /// What a row's id, couple and times say, the entry says already; a couple's revision moves with every
        /// membership write; a budget limit's noun repeats its table.
        static let hidden: Set<String> = [
            "id", "couple_id", "created_at", "updated_at", "revision", "singleton", "noun", "invited_by",
        ]

        /// The fields people look for first, in this order; the others follow by name.
        static let first = [
            "user_id", "role", "status", "email", "display_name", "issuer", "subject", "accepted_by", "revoked_at",
            "name", "from_name", "expense_id", "budget_item_id", "amount", "budgeted", "received", "paid_at",
            "is_primary", "permission", "grantable_role", "rank", "table_name", "max_rows", "expires_at",
        ]

        private static func shown(_ keys: Set<String>) -> [String] {
            let rest = keys.subtracting(hidden).subtracting(first).sorted()
            return first.filter(keys.contains) + rest
        }

        /// A value as text: amounts in whole cents, instants as the other commands print them (PostgreSQL
        /// writes a row's `2099-09-30T18:00:00.5+00:00`), arrays as their elements with commas.
        private static func text(_ value: JSONValue, _ key: String) -> String {
            switch value {
            case .null: "null"
            case .bool(let flag): String(flag)
            case .number(let number) where key == "amount" || key == "budgeted": Money.text(number)
            case .number(let number): "\(number)"
            case .string(let string) where key.hasSuffix("_at"):
                (try? Date(string, strategy: .iso8601))?.iso8601 ?? string
            case .string(let string): string
            case .array(let elements): elements.map { text($0, key) }.joined(separator: ",")
            case .object: "{…}"
            }
        }
    }
}
