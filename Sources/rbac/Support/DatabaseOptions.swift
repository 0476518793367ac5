import ArgumentParser
import Budget
import Collaboration
import Foundation
import Postgres
import Server

/// Where the database is: `--database-url`, else `DATABASE_URL`, else the standard `PG*` variables, else the
/// local cluster rbac manages itself.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: ArgumentHelp(
            "PostgreSQL URL, e.g. postgres://user@host:5432/db, with no password (that goes in $DATABASE_URL, "
                + "$PGPASSWORD or ~/.pgpass). Default: $DATABASE_URL, then the PG* variables, then rbac's own local "
                + "cluster.",
            valueName: "url"))
    var databaseURL: String?

    /// The configuration to connect with; starts the local cluster when nothing else is configured. Every
    /// connection names the operator as `rbac.actor_label` (by default the OS user), so that the audit logs
    /// record who made the changes no command names an actor for: service keys, row limits, the policy.
    func configuration(operatorLabel: String = CommandContext.osUser()) async throws -> PostgresConfiguration {
        var configuration = try await target()
        configuration.settings["rbac.actor_label"] = operatorLabel
        // On Citus, a statement reaching a worker that does not answer waits as long as opening a connection here
        // does rather than Citus's 30 s, holding a connection (in serve, a couple's place too) meanwhile; on plain
        // PostgreSQL, an unused placeholder. Citus takes 10 ms to an hour, and refuses the connection otherwise: a
        // timeout of 0, for ever to libpq, leaves Citus's.
        if configuration.connectTimeout > 0 {
            configuration.settings["citus.node_connection_timeout"] =
                "\(min(configuration.connectTimeout, 3600) * 1000)"
        }
        return configuration
    }

    private func target() async throws -> PostgresConfiguration {
        let environment = ProcessInfo.processInfo.environment
        let explicit = databaseURL ?? environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
        if let explicit {
            let configuration = PostgresConfiguration(connectionString: explicit)
            do {
                try configuration.validate()
            } catch let error as PostgresError {
                throw CommandFailure(.usage, "\(error.message); expected postgres://user@host:port/database")
            }
            // Any local user can read a process's arguments for as long as it runs (`ps`); its environment and a
            // password file, only its owner.
            if databaseURL != nil, configuration.carriesPassword {
                throw CommandFailure(
                    .usage,
                    """
                    --database-url must not carry a password, which the process list shows: give the URL in \
                    DATABASE_URL instead, or the password in PGPASSWORD or a password file (~/.pgpass, PGPASSFILE)
                    """)
            }
            return configuration
        }
        let libpqVariables = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGSERVICE"]
        if libpqVariables.contains(where: { environment[$0]?.isEmpty == false }) {
            return PostgresConfiguration()
        }
        return try await LocalCluster.default().start()
    }

    /// A pool for one CLI command, recording the operator's changes under `operatorLabel`. With `lockWaits`, a
    /// statement waits at most that long for a lock another session holds, unless the URL's options or PGOPTIONS
    /// set a `lock_timeout` of their own (`0` waits for ever).
    func pool(operatorLabel: String, lockWaits: Duration? = nil) async throws
        -> (PostgresConnectionPool, PostgresConfiguration)
    {
        var configuration = try await configuration(operatorLabel: operatorLabel)
        if let lockWaits, !configuration.givesOption("lock_timeout") {
            configuration.settings["lock_timeout"] = PostgresConfiguration.milliseconds(lockWaits)
        }
        return (PostgresConnectionPool(configuration: configuration, maxConnections: 4), configuration)
    }
}

/// `--json` for commands that print data.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON instead of a table.")
    var json = false

    /// Prints `value` as JSON with --json, else `text`, for people: its lines as they are, but for control
    /// characters a value raw SQL wrote may hold, shown escaped (`visible`).
    func print(_ value: some Encodable, _ text: @autoclosure () -> String) throws {
        if json {
            try printJSON(value)
        } else {
            Swift.print(
                text().split(separator: "\n", omittingEmptySubsequences: false).map(visible).joined(separator: "\n"))
        }
    }
}

/// `--limit` and `--after` for listings that the API pages, in an order by `Key`: one page instead of every
/// entry.
struct PageOptions<Key: PlaceKey>: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Only one page of at most n entries (1 to 1000); without it, every entry.", valueName: "n"))
    var limit: Int?
    @Option(
        help: ArgumentHelp(
            "With --limit: the page after this place, as the page before's hint names it (or its last id).",
            valueName: "place"))
    var after: String?

    func validate() throws {
        if let limit, !(1...1000).contains(limit) {
            throw ValidationError("--limit must be from 1 to 1000, not \(limit)")
        }
        if let after {
            guard limit != nil else { throw ValidationError("--after needs --limit: it picks a page") }
            guard PageCursor<Key>(text: after) != nil else {
                throw ValidationError(
                    "--after \(quoted(after)) is neither an id nor the place a \"more may follow\" named")
            }
        }
    }

    /// What `body` reads for the page --limit and --after ask for (nil without --limit: every entry). A full
    /// page says on stderr how to ask for the next one (`printNote`): after the last entry's place, which
    /// holds once that entry is gone, as the API's `next_after` does.
    func read<Item: ListedRow>(_ output: OutputOptions, _ body: (PageRequest<Key>?) async throws -> [Item])
        async throws -> [Item]
    where Item.OrderKey == Key {
        let after = after.flatMap { PageCursor<Key>(text: $0) }  // validate() refused any other text
        let items = try await body(limit.map { PageRequest(limit: $0, after: after) })
        if let limit, items.count == limit, let place = items.last?.cursor.text {
            printNote(json: output.json, "more may follow: --after \(place)", "next_after", place)
        }
        return items
    }

    /// Prints every entry, each page as it is read (`ListingPrinter`) after the place of the last entry read, or
    /// with --limit one page of them, after the place --after gives.
    func print<Item: Encodable & ListedRow>(
        _ output: OutputOptions, _ columns: Columns<Item>,
        pages page: (_ limit: Int, _ after: PageCursor<Key>?) async throws -> [Item]
    ) async throws where Item.OrderKey == Key {
        var printer = ListingPrinter(json: output.json, columns: columns)
        if let limit {
            try printer.print(
                try await read(output) { try await page(limit, $0?.after) })
        } else {
            try await forEachPage(id: \.cursor, page) { try printer.print($0) }
        }
        try printer.finish()
    }

    /// Refuses --limit with the first of `options` given: with it, a command prints what it wrote, not a list.
    func refuse(with options: [(name: String, given: Bool)]) throws {
        guard limit != nil, let option = options.first(where: \.given) else { return }
        throw ValidationError("--limit and --after page a listing; they do not go with \(option.name)")
    }
}
