import ArgumentParser
import Collaboration
import Foundation
import Postgres
import Secrets
import Storage

/// The options of a command that acts in a couple: who acts (by default the operator running the CLI, with full
/// rights, recorded under the OS user or --actor-label; with --actor, that member of the couple, whose permissions
/// and grantable roles apply), the database, the output.
///
/// A type of options declares these itself rather than holding `ActingOptions` when it is a group of its
/// commands' options (the budget's): ArgumentParser's debug builds check each group once per group enclosing it,
/// so every level of nesting multiplies the time a command takes to start, which the CLI tests pay on every run.
protocol Acting: ParsableArguments {
    var actor: String? { get }
    var label: OperatorLabelOptions { get }
    var database: DatabaseOptions { get }
    var output: OutputOptions { get }
}

extension Acting {
    static var actorHelp: ArgumentHelp {
        ArgumentHelp("Act as this member (user id or email) instead of as the operator.", valueName: "user")
    }

    func validateActor() throws {
        guard let actor else { return }
        try Parse.user(actor)
        // A change made as a member is recorded as that member: a label given too would be silently dropped.
        if label.actorLabel != nil {
            throw ValidationError(
                "give --actor or --actor-label, not both: a change made with --actor is recorded as that user")
        }
    }

    /// Runs `body` with the context and the acting person: the member --actor names, else the operator.
    func run<T>(_ body: (CommandContext, Actor) async throws -> T) async throws -> T {
        try await CommandContext.run(database, operatorLabel: label.recorded) { context in
            guard let actor else { return try await body(context, .operator(label: label.recorded)) }
            return try await body(context, .user(try await context.user(actor).id))
        }
    }
}

/// The acting options as a group of their own, for commands that take them beside their own options.
struct ActingOptions: Acting {
    @Option(help: actorHelp) var actor: String?
    @OptionGroup var label: OperatorLabelOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions

    func validate() throws { try validateActor() }
}

/// `--actor-label`: the name the audit logs record for the operator's changes, `operator:<label>`.
struct OperatorLabelOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Record the operator in the audit log under this label (default: the OS user).", valueName: "label"))
    var actorLabel: String?

    /// The longest label taken, in characters.
    static let maxLength = 100

    func validate() throws {
        guard let actorLabel else { return }
        guard !actorLabel.isEmpty, actorLabel.count <= Self.maxLength else {
            throw ValidationError("--actor-label must have 1 to \(Self.maxLength) characters, not \(actorLabel.count)")
        }
        do {
            try refuseControlCharacters(actorLabel, "--actor-label")
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The label to record: --actor-label, else the OS user.
    var recorded: String { actorLabel ?? CommandContext.osUser() }
}

/// The options of a command that acts as the operator: the label its changes are recorded under, the database,
/// the output.
struct OperatorOptions: ParsableArguments {
    @OptionGroup var label: OperatorLabelOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var output: OutputOptions

    /// Runs `body` with a context whose changes are recorded under the operator's label. `waitingForDatabase`
    /// and `lockWaits`: see `CommandContext.run`.
    func run<T>(
        waitingForDatabase: Bool = false, lockWaits: Duration? = CommandContext.lockWaits,
        _ body: (CommandContext) async throws -> T
    ) async throws -> T {
        try await CommandContext.run(
            database, operatorLabel: label.recorded, waitingForDatabase: waitingForDatabase, lockWaits: lockWaits,
            body)
    }
}

/// The services a command works with, on the configured database.
struct CommandContext {
    let repository: PostgresCollaborationRepository
    let pool: PostgresConnectionPool
    let permissions: CollaborationPermissionService
    let memberships: MembershipService
    /// Read when a command needs it, so that only invitation commands fail on a bad public URL.
    var invitations: CollaborationInvitationService {
        get throws { CollaborationInvitationService(repository: repository, baseURL: try Self.publicBaseURL()) }
    }

    /// How long a command's statement waits for a lock another session holds (a transaction left open in psql)
    /// before the command ends, changing nothing (exit 5), rather than wait without a word for as long as that
    /// session lasts.
    static let lockWaits = Duration.seconds(10)

    /// Runs `body` with a context on the configured database, turning every failure into a `CommandFailure`.
    /// Changes made as the operator are recorded under `operatorLabel`. With `waitingForDatabase`, for a command
    /// that runs until stopped, a database that cannot be reached yet is `body`'s to wait for, as `serve`'s is:
    /// the login is not asked about then. `lockWaits`: see `DatabaseOptions.pool`.
    static func run<T>(
        _ database: DatabaseOptions, operatorLabel: String = osUser(), waitingForDatabase: Bool = false,
        lockWaits: Duration? = lockWaits, _ body: (CommandContext) async throws -> T
    ) async throws -> T {
        var configuration: PostgresConfiguration?
        do {
            let (pool, resolved) = try await database.pool(operatorLabel: operatorLabel, lockWaits: lockWaits)
            configuration = resolved
            // With a delivery key in the environment, invitations made here seal their link for the outbox's email.
            let repository = PostgresCollaborationRepository(
                pool: pool, deliveryKey: try DeliveryKeyOptions.load(file: nil, ProcessInfo.processInfo.environment))
            let context = CommandContext(
                repository: repository, pool: pool,
                permissions: CollaborationPermissionService(repository: repository),
                memberships: MembershipService(repository: repository))
            return try await ensuring {
                do {
                    try await requireOperator(pool, database: resolved)
                } catch let error as PostgresError where waitingForDatabase && error.unreachable {}
                return try await body(context)
            } finally: {
                await pool.close()
            }
        } catch {
            throw CommandFailure(error, database: configuration)
        }
    }

    /// Refuses a login role that is no rbac operator (a member of rbac_operator, or a superuser). The CLI and
    /// `serve` act as the operator, with --actor and for end users on their behalf; another role would be
    /// refused each write in words about tables, and shown empty listings by row-level security as if there were
    /// nothing to list. Asked in words any role may run (`rbac.is_operator` is the operators'); on a database
    /// without the role yet, the command goes on to say that it lacks rbac's schema, unless it is `migrating`:
    /// the functions a migration installs run as its login, past row-level security only as an operator's, and
    /// the policy it applies is the operator's, so a login that is not one would leave a half-made database.
    static func requireOperator(
        _ pool: PostgresConnectionPool, database: PostgresConfiguration, migrating: Bool = false
    ) async throws {
        let row = try await pool.query(
            """
            SELECT session_user::text AS role,
                   (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) AS superuser,
                   CASE WHEN to_regrole('rbac_operator') IS NOT NULL
                        THEN pg_has_role(session_user, 'rbac_operator', 'MEMBER') END AS operator
            """)[0]
        // nil: no such role yet. A migration makes it, and only a superuser acts as one before being made one.
        let member = try row.decode("operator", as: Bool?.self)
        let superuser = try row.decode("superuser", as: Bool.self)
        guard member == false || (migrating && member == nil && !superuser) else { return }
        let role: String = try row.decode("role")
        let login = "the database at \(database.redactedDescription) logs in as \(quoted(role))"
        guard migrating else {
            throw CommandFailure(
                .denied,
                "\(login), which is no rbac operator: connect as a member of rbac_operator, or a superuser")
        }
        throw CommandFailure(
            .denied,
            "\(login), which is neither a superuser nor a member of rbac_operator: the functions it installs run "
                + "with its rights, which must reach past row-level security; migrate as a superuser, or as the "
                + "database's owner with CREATEROLE once a member (GRANT rbac_operator TO \(quoted(role)); CREATE "
                + "ROLE rbac_operator NOLOGIN first where there is none)")
    }

    /// Base URL of invitation links: `option` (`--public-url`), else $RBAC_PUBLIC_URL, else `fallback`. Anything
    /// but an absolute http(s) URL without credentials, query or fragment, naming a server (`serverRefusal`), is a
    /// usage error: a link made from it would not open, or would hand the credentials to every invitee.
    static func publicBaseURL(_ option: String? = nil, fallback: String = "http://localhost:8080") throws -> URL {
        let configured = ProcessInfo.processInfo.environment["RBAC_PUBLIC_URL"].flatMap { $0.isEmpty ? nil : $0 }
        let text = option ?? configured ?? fallback
        let source = option != nil ? "--public-url" : configured != nil ? "RBAC_PUBLIC_URL" : "the public URL"
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased()),
            url.host?.isEmpty == false, url.user == nil, url.password == nil, url.query == nil, url.fragment == nil
        else {
            // Text with an @ may hold a password: it is not repeated.
            let shown = text.contains("@") ? "" : ", not \(quoted(text))"
            throw CommandFailure(
                .usage, "\(source) must be an absolute http(s) URL such as https://rbac.example.com\(shown)")
        }
        if let refusal = URLComponents(string: text)?.serverRefusal(source) { throw CommandFailure(.usage, refusal) }
        return url
    }

    /// The OS user running the command: as the login shell named it, else as the user database names the
    /// process's user (cron, systemd units and containers often set neither variable), else by number. A name
    /// from the environment that `--actor-label` would refuse is passed over.
    static func osUser() -> String {
        let environment = ProcessInfo.processInfo.environment
        let named = [environment["USER"], environment["LOGNAME"]].compactMap { $0 }.first {
            (1...OperatorLabelOptions.maxLength).contains($0.count) && !containsControlCharacter($0)
        }
        return named ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "uid-\(getuid())"
    }

    func user(_ text: String) async throws -> User {
        try await repository.user(try UserReference(parsing: text))
    }
}

/// Shared parsing of ids people type: refused before any query runs.
enum Parse {
    /// An id of a `kind` (scenario, expense, ...): a UUID, else a validation error naming the kind.
    static func id(_ text: String, _ kind: String) throws -> UUID {
        guard let id = UUID(parsing: text) else {
            let article = kind.first.map { "aeiou".contains($0) } == true ? "an" : "a"
            throw ValidationError("\(quoted(text)) is not \(article) \(kind) id (a UUID)")
        }
        return id
    }

    static func couple(_ text: String) throws -> UUID { try validated { try parseCoupleID(text) } }

    /// The value of `option` as an https URL (or http too, with `orHTTP`) naming a server (`serverRefusal`). Not
    /// for text that may hold a password: a refusal quotes it.
    static func url(_ text: String, _ option: String, orHTTP: Bool = false) throws {
        let schemes = orHTTP ? ["http", "https"] : ["https"]
        guard let url = URL(string: text), schemes.contains(url.scheme?.lowercased() ?? "") else {
            throw ValidationError("\(option) must be an \(orHTTP ? "http(s)" : "https") URL, not \(quoted(text))")
        }
        if let refusal = URLComponents(string: text)?.serverRefusal(option) { throw ValidationError(refusal) }
    }

    static func email(_ text: String) throws { _ = try validated { try EmailAddress(validating: text) } }

    static func user(_ text: String) throws { _ = try validated { try UserReference(parsing: text) } }

    /// A role's or a permission's name.
    @discardableResult
    static func name<Name: CheckedName>(_ text: String, as _: Name.Type = Name.self) throws -> Name {
        try validated { try Name(validating: text) }
    }

    /// What `parse` makes of a person's text; its error becomes ArgumentParser's, which prints it with the usage.
    private static func validated<Value>(_ parse: () throws -> Value) throws -> Value {
        do {
            return try parse()
        } catch let error as CollaborationError {
            throw ValidationError(error.message)
        }
    }

    /// An invitation token, or a link whose last path component is one. The error never repeats the text: a
    /// token cut short in pasting is still most of a secret.
    static func invitationToken(_ text: String) throws -> SecretToken {
        let last = text.split(separator: "/").last.map(String.init) ?? text
        guard let token = SecretToken(parsing: last, as: .invitation) else {
            throw ValidationError(
                "that is not an invitation token (inv_ and \(SecretToken.encodedLength) characters) or a link ending in one"
            )
        }
        return token
    }
}

extension Date {
    var iso8601: String { formatted(.iso8601) }
}
