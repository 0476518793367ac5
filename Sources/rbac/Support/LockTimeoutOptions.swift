import ArgumentParser
import Postgres

/// `--lock-timeout` of the commands that change the schema or the policy, which lock whole tables.
struct LockTimeoutOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            """
            How long a statement may wait for a lock another session holds (a transaction left open in psql, a \
            long report) before the run gives up, changing nothing: 100ms to 600s. While it waits, every later \
            query of the table it waits for, serve's checks too, waits behind it.
            """, valueName: "duration"))
    var lockTimeout = RBAC.ShortDuration(argument: "10s")!

    func validate() throws {
        try lockTimeout.require("--lock-timeout", from: "100ms", to: "600s")
    }

    var duration: Duration { lockTimeout.duration }

    /// `error` as the failure to report, when it is a lock waited for past --lock-timeout during `what` ("applying
    /// 0042_x.sql"), of which `undone` says what was left undone.
    func failure(_ error: PostgresError, during what: String, undone: String) -> CommandFailure? {
        guard error.sqlState == .lockNotAvailable else { return nil }
        return CommandFailure(
            .databaseUnavailable,
            """
            \(what) waited longer than --lock-timeout (\(lockTimeout.defaultValueDescription)) for a lock another \
            session holds, so \(undone); try again once that session has ended (pg_stat_activity shows it), or \
            give a longer --lock-timeout
            """)
    }
}
