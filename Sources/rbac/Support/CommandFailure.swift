import Collaboration
import Foundation
import Postgres
import Storage

/// The exit codes of a failure, as `rbac --help` documents them (success exits 0).
enum ExitStatus: Int32 {
    case denied = 1
    case usage = 2
    case notFound = 3
    case conflict = 4
    case databaseUnavailable = 5

    /// The code of a failure with this status that has none of its own, as `--json` prints it: the HTTP API's
    /// where it has one, and `conflict` for the state of the database or its migrations.
    var code: String {
        switch self {
        case .denied: CollaborationError.Code.permissionDenied.rawValue
        case .usage: CollaborationError.Code.invalidInput.rawValue
        case .notFound: CollaborationError.Code.notFound.rawValue
        case .conflict: "conflict"
        case .databaseUnavailable: CollaborationError.Code.unavailable.rawValue
        }
    }
}

/// A failure to report as one line on stderr (what failed, why, what to do) with its exit code.
struct CommandFailure: Error {
    let status: ExitStatus
    /// What `--json` names it by: the HTTP API's code for the same refusal, else the exit status's.
    let code: String
    let message: String

    init(_ status: ExitStatus, _ message: String, code: String? = nil) {
        self.status = status
        self.code = code ?? status.code
        self.message = message
    }

    /// Maps errors from the lower layers to a line for people. Never includes SQL text, bound values or secrets.
    init(_ error: any Error, database: PostgresConfiguration? = nil) {
        switch error {
        case let failure as CommandFailure:
            self = failure
        case let error as DeliveryKeyMismatch:
            self.init(.conflict, error.message)
        case let error as any CodedError:
            // The operator runs this: the detail, the database's own words on why it cannot be reached, is theirs.
            let refusal = CollaborationError(error)
            self.init(Self.status(for: refusal.code), refusal.description, code: error.codeName)
        case let error as PostgresError where error.refusesConnectionOption:
            self.init(.usage, "invalid database URL or PG* variable: \(error.message)")
        case let error as PostgresError where error.kind == .connection || error.kind == .poolTimeout:
            let target = database.map { " at \($0.redactedDescription)" } ?? ""
            // Also when the server answered but refused the login (no such role or database, a wrong password):
            // libpq reports no SQLSTATE for a connection it could not make, and its message says which.
            self.init(.databaseUnavailable, "cannot connect to the database\(target): \(error.message)")
        case let error as PostgresError where error.sqlState?.errorClass == "RB":
            // Raised by the SQL functions: the message is written for people and carries no secrets.
            let mapped = domainError(error) as? CollaborationError
            self.init(
                mapped.map { Self.status(for: $0.code) } ?? .usage, mapped?.message ?? error.message,
                code: mapped?.code.rawValue)
        case let error as PostgresError
        where [.undefinedTable, .undefinedColumn, .undefinedFunction, .invalidSchemaName].contains(error.sqlState):
            // A release newer than the database's schema. The server's message names the missing table, column,
            // function or schema, never a value.
            let target = database.map { " at \($0.redactedDescription)" } ?? ""
            self.init(
                .conflict,
                "the database\(target) lacks part of rbac's schema (\(error.message)): run `rbac migrate` "
                    + "(`rbac migrate --status` lists what is pending)")
        case let error as PostgresError where error.sqlState == .insufficientPrivilege:
            // The server's message names the object refused, never a value.
            let target = database.map { " at \($0.redactedDescription)" } ?? ""
            self.init(
                .denied,
                "the database\(target) refuses this to its login role (\(error.message)): `rbac migrate` needs a "
                    + "superuser or the database's owner, the other commands a member of rbac_operator")
        case let error as PostgresError:
            self.init(.databaseUnavailable, "database error: \(error)")
        case let error as AccessPolicyError:
            self.init(.usage, error.description, code: CollaborationError.Code.invalidPolicy.rawValue)
        case let error as MigrationError:
            switch error {
            case .changedAfterApply, .unknownApplied: self.init(.conflict, "\(error)")
            case .directoryUnreadable: self.init(.notFound, "\(error)")
            default: self.init(.usage, "\(error)")
            }
        case let error as ProjectFilesError:
            self.init(.notFound, error.description)
        default:
            self.init(.usage, "\(error)")
        }
    }

    /// Exit status for each kind of refusal.
    static func status(for code: CollaborationError.Code) -> ExitStatus {
        switch code {
        case .permissionDenied, .roleNotGrantable, .notAuthenticated: .denied
        case .notFound: .notFound
        case .alreadyExists, .lastOwner, .invitationUsed, .invitationRevoked, .invitationExpired,
            .invitationEmailMismatch, .quotaExceeded, .rateLimited, .roleInUse, .primaryScenario,
            .inProgress:
            .conflict
        case .invalidInput, .invalidPolicy: .usage
        case .unavailable: .databaseUnavailable
        }
    }

}

extension PostgresError {
    /// libpq's refusal of a connection option's value (sslmode=bogus, say) before it tries any server: the settings
    /// are at fault, not the server, and no retry would help. Its message quotes the value, never a password.
    var refusesConnectionOption: Bool { kind == .connection && message.hasPrefix("invalid ") }

    /// No connection could be made, or none was free in time: what a service waits out rather than stops for.
    /// Also a login the server refused, which libpq cannot tell apart.
    var unreachable: Bool { (kind == .connection && !refusesConnectionOption) || kind == .poolTimeout }
}
