import Collaboration
import Postgres

/// The SQLSTATEs the product's SQL functions raise (class RB; sql/functions/access.sql lists them), each with a
/// message written for people.
extension SQLState {
    public static let notAuthenticated = SQLState("RBAUT")
    public static let permissionDenied = SQLState("RBDEN")
    public static let roleNotGrantable = SQLState("RBESC")
    public static let notFound = SQLState("RBNFD")
    public static let alreadyExists = SQLState("RBDUP")
    public static let invalidInput = SQLState("RBINV")
    public static let lastOwner = SQLState("RBLST")
    public static let invitationExpired = SQLState("RBEXP")
    public static let invitationRevoked = SQLState("RBREV")
    public static let invitationUsed = SQLState("RBUSD")
    public static let invitationEmailMismatch = SQLState("RBEML")
    public static let invalidPolicy = SQLState("RBPOL")
    public static let quotaExceeded = SQLState("RBQTA")
    public static let rateLimited = SQLState("RBRAT")
    public static let roleInUse = SQLState("RBHLD")

    /// The domain error code of each of the product's own SQLSTATEs.
    static let domainCodes: [SQLState: CollaborationError.Code] = [
        .notAuthenticated: .notAuthenticated, .permissionDenied: .permissionDenied,
        .roleNotGrantable: .roleNotGrantable, .notFound: .notFound, .alreadyExists: .alreadyExists,
        .invalidInput: .invalidInput, .lastOwner: .lastOwner, .invitationExpired: .invitationExpired,
        .invitationRevoked: .invitationRevoked, .invitationUsed: .invitationUsed,
        .invitationEmailMismatch: .invitationEmailMismatch, .invalidPolicy: .invalidPolicy,
        .quotaExceeded: .quotaExceeded, .rateLimited: .rateLimited, .roleInUse: .roleInUse,
    ]
}

/// The domain error for a database error, for every repository of this module: the functions' own SQLSTATEs,
/// unique and check violations, data exceptions, lost connections. An `unconfirmed` one is noted in the task's
/// `UnconfirmedChanges`: what maps it is in the request that may have made the change.
public func domainError(_ error: PostgresError) -> any Error {
    if error.unconfirmed { UnconfirmedChanges.current?.note() }
    switch error.kind {
    case .connection, .poolTimeout, .closed:
        return CollaborationError(.unavailable, "cannot reach the database", detail: error.message)
    case .server, .decoding, .invalidQuery:
        break
    }
    guard let state = error.sqlState else { return error }
    if let code = SQLState.domainCodes[state] {
        // A rate limit's DETAIL is the moment it lifts (sql/functions/invitations.sql).
        let retryAt = code == .rateLimited ? error.detail.flatMap(instant(parsing:)) : nil
        return CollaborationError(code, error.message + (error.hint.map { "; \($0)" } ?? ""), retryAt: retryAt)
    }
    switch state {
    case .uniqueViolation where error.constraint == "users_email_key":
        return CollaborationError(.alreadyExists, "a user with this email address already exists")
    case .uniqueViolation where error.constraint == "user_identities_pkey":
        return CollaborationError(.alreadyExists, "this identity already belongs to a user")
    case .uniqueViolation:
        return CollaborationError(.alreadyExists, "it already exists (\(error.constraint ?? "unique constraint"))")
    case .checkViolation:
        return CollaborationError(.invalidInput, "a value is out of range (\(error.constraint ?? "check"))")
    case .adminShutdown, .crashShutdown, .cannotConnectNow:
        // The server ended the session (shut down, crashed, or is starting): the database is away, not wrong.
        return CollaborationError(.unavailable, "cannot reach the database", detail: error.message)
    case _ where state.errorClass == "08":
        // Sent by the server, not libpq: a node it needs cannot be reached (on Citus, the worker holding the
        // couple's budget and audit log, by its address). The statement did nothing there; it may work once the
        // node is back.
        return CollaborationError(.unavailable, "cannot reach part of the database", detail: error.message)
    case .lockNotAvailable:
        // `rbac serve` waits that long (--lock-timeout) for a lock, rather than let one left held take every
        // connection, and a CLI command rather than wait without a word; the transaction is rolled back.
        return CollaborationError(
            .unavailable, "waited too long for a lock that another change or session holds; try again shortly",
            detail: "lock_timeout passed; pg_stat_activity shows the session that holds it")
    case .characterNotInRepertoire:
        return CollaborationError(.invalidInput, "a text value contains a NUL character, which cannot be stored")
    case _ where state.errorClass == "22":
        // A data exception: a value the checks upstream let through but the server cannot take. The server's
        // message may quote the value, so it is not passed on.
        return CollaborationError(.invalidInput, "a value is not valid here (SQLSTATE \(state.rawValue))")
    default:
        return error
    }
}

/// `domainError` for statements that only read: cut off, they changed nothing, whether or not they may commit.
func domainError(reading error: PostgresError) -> any Error {
    var error = error
    error.unconfirmed = false
    return domainError(error)
}
