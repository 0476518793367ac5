import ArgumentParser

/// How long the sweep keeps settled outbox messages, for `rbac outbox list`, before it deletes them.
struct OutboxKeepingOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Delete a sent outbox message this long after its delivery (30m, 12h, 7d).", valueName: "lifetime"))
    var keepSent = Lifetime(argument: "7d")!
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            """
            Delete a dead outbox message this long after its last attempt (30m, 12h, 7d); until then rbac outbox \
            retry can take it back.
            """, valueName: "lifetime"))
    var keepDead = Lifetime(argument: "30d")!

    func validate() throws {
        for (option, lifetime) in [("--keep-sent", keepSent), ("--keep-dead", keepDead)]
        where lifetime.duration < .seconds(60) {
            throw ValidationError("\(option) must be at least 1m, not \(lifetime.defaultValueDescription)")
        }
    }
}
