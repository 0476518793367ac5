// Checks at scale, on databases seeded by scripts/bench-scale with many couples of three members:
//
// 1. The permission cache under cold traffic: for MINUTES minutes, checks of one member of a couple drawn
//    uniformly from all of them, and one check in ten of a hot set of 1,000 couples, through the service's
//    checker, cache (at its default capacity) and change feed. Each minute prints the rate, the hit rate, the
//    hot set's hit rate and the process's resident memory; the last minute is compared with the first (goal:
//    at least 0.9x). Before it, the memory one cached (couple, user) entry takes.
// 2. Deploys under load: uncached checks, uniform over all couples, for 15 seconds alone, 15 seconds while
//    `rbac migrate` runs again and again with nothing to apply, and 15 seconds while the policy keeps changing
//    (a permission given to and taken from a role). Prints each window's p99 and slowest check, against the
//    window alone.
//
//   ScaleBenchmark [MINUTES]        (default 10; connection from PGHOST, PGPORT, PGDATABASE, ...)
//
// `ScaleBenchmark rates BASELINE OTHER [SECONDS]` instead compares two databases (libpq key=value connection
// strings) in one run, 32 tasks: warm checks (answered from a cache warmed with 10,000 of the couples), then
// database-forced ones (uniform over every couple), each in 3 x SECONDS (default 10) rounds of a second,
// alternating between the two; it prints the median rates and, for OTHER against BASELINE, the median of each
// round against its neighbour, with the lowest and highest of those. Then users searched for a part
// of one address (as `GET /v1/users?search=` finds them), 8 tasks: at OTHER against BASELINE, and at each with
// the planner kept from the trigram indexes (a session without bitmap scans, which GIN indexes need), as every
// user was read before them; and for two letters, at the start of an address or a name, at OTHER against
// BASELINE.

import Collaboration
import Foundation
import Postgres
import Storage
import Synchronization

/// A flag shared by tasks.
final class Flag: Sendable {
    private let value = Atomic(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set(_ newValue: Bool = true) { value.store(newValue, ordering: .relaxed) }
}

/// SplitMix64, one generator per task: the system's generator asks the kernel for every number, a system call
/// per check that costs a cached check more than the check itself.
struct TaskRandom: RandomNumberGenerator {
    private var state = UInt64.random(in: .min ... .max)

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// Runs `workers` tasks doing `check` until `stop` is set, each with its own random numbers; returns how many
/// checks they made. Each task counts its own (a shared counter would be written from both cores on every check).
@discardableResult
func load(workers: Int, until stop: Flag, _ check: @escaping @Sendable (inout TaskRandom) async throws -> Void)
    async throws -> Int
{
    try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<workers {
            group.addTask {
                var (random, done) = (TaskRandom(), 0)
                while !stop.isSet {
                    try await check(&random)
                    done += 1
                    // A cached check never suspends: without this the tasks would keep the threads from the
                    // timer. Not after every check, which would time the executor more than the check.
                    if done % 64 == 0 { await Task.yield() }
                }
                return done
            }
        }
        return try await group.reduce(0, +)
    }
}

/// Checks a second that `workers` tasks doing `check` make in `seconds`.
func rate(workers: Int, seconds: Int, _ check: @escaping @Sendable (inout TaskRandom) async throws -> Void)
    async throws -> Double
{
    let stop = Flag()
    let running = Task { try await load(workers: workers, until: stop, check) }
    try await Task.sleep(for: .seconds(seconds))
    stop.set()
    return Double(try await running.value) / Double(seconds)
}

/// The process's resident memory in bytes (VmRSS).
func residentBytes() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
}

let edit = Permission(rawValue: "budget.edit")!

/// One member of each couple (the planner), in couple id order: a check draws its pair from here.
func plannerPairs(_ pool: PostgresConnectionPool) async throws -> [(couple: UUID, user: UUID)] {
    try await pool.query("SELECT couple_id, user_id FROM memberships WHERE role = 'planner' ORDER BY couple_id")
        .map { (try $0.decode("couple_id"), try $0.decode("user_id")) }
}

if CommandLine.arguments.dropFirst().first == "rates" {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    guard arguments.count >= 2, let seconds = Int(arguments.count > 2 ? arguments[2] : "10"), seconds > 0 else {
        FileHandle.standardError.write(Data("usage: ScaleBenchmark rates BASELINE OTHER [SECONDS]\n".utf8))
        exit(2)
    }
    struct Target {
        let pool: PostgresConnectionPool
        let pairs: [(couple: UUID, user: UUID)]
        /// The 10,000 pairs the warm checks draw from, all cached before the first round.
        let warmed: [(couple: UUID, user: UUID)]
        let warm: PermissionChecker
        let uncached: PermissionChecker
        let url: String
    }
    var targets: [Target] = []
    for url in arguments.prefix(2) {
        let pool = PostgresConnectionPool(
            configuration: PostgresConfiguration(connectionString: url, applicationName: "scale-benchmark"),
            maxConnections: 8)
        let repository = PostgresCollaborationRepository(pool: pool)
        let pairs = try await plannerPairs(pool)
        // A cache that nothing invalidates for the run: the databases do not change while it lasts.
        let warm = PermissionChecker(repository: repository, cache: PermissionCache(), isCacheTrusted: { true })
        let warmed = Array(pairs.shuffled().prefix(10_000))
        for pair in warmed {
            _ = try await warm.checkKnown(couple: pair.couple, user: pair.user, permission: edit)
        }
        targets.append(
            Target(
                pool: pool, pairs: pairs, warmed: warmed, warm: warm,
                uncached: PermissionChecker(repository: repository), url: url))
        FileHandle.standardError.write(Data("\(pairs.count) couples in \(url)\n".utf8))
    }
    // Rounds of a second, the two databases in turn, each compared with its neighbour, which runs in the same
    // stretch: a check's speed changes with how the machine runs the two cores (by up to two thirds, for tens of
    // seconds at a time, on a 2-core virtual machine), and a ratio of medians over rounds of 10 s moved with which
    // database's rounds the slow stretches fell on. Returns each database's rates and the neighbours' ratios.
    func pairedRounds(_ check: (Target) -> @Sendable (inout TaskRandom) async throws -> Void) async throws -> (
        rates: [[Double]], ratios: [Double]
    ) {
        var (rates, ratios): ([[Double]], [Double]) = ([[], []], [])
        for round in 0..<(3 * seconds) {
            var adjacent = [0.0, 0.0]
            for index in round % 2 == 0 ? [0, 1] : [1, 0] {
                adjacent[index] = try await rate(workers: 32, seconds: 1, check(targets[index]))
                rates[index].append(adjacent[index])
            }
            ratios.append(adjacent[1] / adjacent[0])
        }
        return (rates, ratios)
    }
    let warm = try await pairedRounds { target in
        let (checker, sample) = (target.warm, target.warmed)
        return { random in
            let pair = sample[Int.random(in: 0..<sample.count, using: &random)]
            if checker.cachedCheck(couple: pair.couple, user: pair.user, permission: edit) == nil {
                _ = try await checker.checkKnown(couple: pair.couple, user: pair.user, permission: edit)
            }
        }
    }
    let forced = try await pairedRounds { target in
        let (checker, pairs) = (target.uncached, target.pairs)
        return { random in
            let pair = pairs[Int.random(in: 0..<pairs.count, using: &random)]
            _ = try await checker.check(couple: pair.couple, user: pair.user, permission: edit)
        }
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    print("checks/s (medians)            baseline       other   other/baseline")
    for (label, rounds) in [("warm (cached)", warm), ("database-forced", forced)] {
        print(
            label.padding(toLength: 24, withPad: " ", startingAt: 0)
                + String(
                    format: "%14.0f %11.0f %10.2fx   (rounds: %.2f to %.2f)", median(rounds.rates[0]),
                    median(rounds.rates[1]), median(rounds.ratios), rounds.ratios.min()!, rounds.ratios.max()!))
    }
    /// Searches a second, each for the text `search` draws, which must find as many users as it says.
    func searchRate(
        _ target: Target, options: String = "",
        _ search: @escaping @Sendable (inout TaskRandom) -> (text: String, finds: Int)
    ) async throws -> Double {
        let pool = PostgresConnectionPool(
            configuration: PostgresConfiguration(connectionString: target.url + options), maxConnections: 8)
        let repository = PostgresCollaborationRepository(pool: pool)
        let searched = try await rate(workers: 8, seconds: seconds) { random in
            let (text, finds) = search(&random)
            let found = try await repository.users(matching: text, limit: 50, after: nil)
            precondition(found.count == finds, "searching \(text) in \(target.url) found \(found.count), not \(finds)")
        }
        await pool.close()
        return searched
    }
    let letters = Array("abcdefghijklmnopqrstuvwxyz")
    var searched: [(indexed: Double, unindexed: Double, pairs: Double)] = []
    for target in targets {
        // "user17@" finds user17@example.com alone among the seeded addresses, every one of which is there until
        // the benchmark's last steps delete one.
        let users = 3 * target.pairs.count
        let address: @Sendable (inout TaskRandom) -> (String, Int) = {
            ("user\(Int.random(in: 1...users, using: &$0))@", 1)
        }
        // Two letters, as an autocompletion's first keystrokes: they begin no seeded address but "us", which
        // begins every one (the seeded users have no names).
        let pair: @Sendable (inout TaskRandom) -> (String, Int) = {
            let text = String([letters.randomElement(using: &$0)!, letters.randomElement(using: &$0)!])
            return (text, text == "us" ? 50 : 0)
        }
        searched.append(
            (
                try await searchRate(target, address),
                try await searchRate(target, options: " options='-c enable_bitmapscan=off'", address),
                try await searchRate(target, pair)
            ))
    }
    print(
        "users searched/s".padding(toLength: 24, withPad: " ", startingAt: 0)
            + String(
                format: "%14.0f %11.0f %10.2fx", searched[0].indexed, searched[1].indexed,
                searched[1].indexed / searched[0].indexed))
    print(
        "  without the indexes".padding(toLength: 24, withPad: " ", startingAt: 0)
            + String(format: "%14.1f %11.1f", searched[0].unindexed, searched[1].unindexed)
            + String(format: "   with them at other: %.0fx", searched[1].indexed / searched[1].unindexed))
    print(
        "  two letters".padding(toLength: 24, withPad: " ", startingAt: 0)
            + String(
                format: "%14.0f %11.0f %10.2fx", searched[0].pairs, searched[1].pairs,
                searched[1].pairs / searched[0].pairs))
    for target in targets { await target.pool.close() }
    exit(0)
}

let minutes = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 10
guard minutes > 0 else {
    FileHandle.standardError.write(
        Data("usage: ScaleBenchmark [MINUTES] | ScaleBenchmark rates BASELINE OTHER [SECONDS]\n".utf8))
    exit(2)
}

let configuration = PostgresConfiguration(applicationName: "scale-benchmark")
let pool = PostgresConnectionPool(configuration: configuration, maxConnections: 8)
let repository = PostgresCollaborationRepository(pool: pool)
let pairs = try await plannerPairs(pool)
let hotCount = 1_000
guard pairs.count > 10 * hotCount else {
    FileHandle.standardError.write(Data("the database holds \(pairs.count) couples; seed more\n".utf8))
    exit(2)
}
FileHandle.standardError.write(Data("\(pairs.count) couples\n".utf8))

/// Checks counted since the last report: all, answered from the cache, and the same for the hot set.
struct Counts {
    var checks = 0
    var hits = 0
    var hotChecks = 0
    var hotHits = 0
}

// MARK: 1. The cache under cold traffic

// The cache's capacity in couples: CACHE_CAPACITY, as `rbac serve --cache-capacity`, else the default.
let cache =
    ProcessInfo.processInfo.environment["CACHE_CAPACITY"].flatMap(Int.init).map { PermissionCache(capacity: $0) }
    ?? PermissionCache()
let feed = ChangeFeed(configuration: configuration, permissions: cache)
let listening = Task { await feed.run() }
while !feed.isTrusted() { try await Task.sleep(for: .milliseconds(10)) }
let cached = PermissionChecker(repository: repository, cache: cache, isCacheTrusted: feed.isTrusted)

// The memory of a full cache: one (couple, user) entry per couple, filled from the database.
let before = residentBytes()
let filling = Array(pairs.prefix(cache.capacity))
let next = Atomic(0)
let filled = Flag()
try await load(workers: 16, until: filled) { _ in
    let index = next.add(1, ordering: .relaxed).newValue - 1
    guard index < filling.count else { return filled.set() }
    _ = try await cached.checkKnown(couple: filling[index].couple, user: filling[index].user, permission: edit)
}
let perEntry = Double(residentBytes() - before) / Double(max(cache.count, 1))
print(
    String(
        format: "0. A full cache: %d couples' entries, resident memory %.0f MB more, %.0f bytes an entry",
        cache.count, Double(residentBytes() - before) / 1e6, perEntry))

let counts = Mutex(Counts())
let stopCache = Flag()
print("1. Permission cache (capacity \(cache.capacity) couples), \(pairs.count) couples, one check in ten hot")
print("minute   checks/s   hit rate   hot hit rate   cached couples   evictions   resident MB")
let cacheLoad = Task {
    try await load(workers: 64, until: stopCache) { random in
        let hot = Int.random(in: 0..<10, using: &random) == 0
        let pair = pairs[Int.random(in: 0..<(hot ? hotCount : pairs.count), using: &random)]
        var hit = true
        if cached.cachedCheck(couple: pair.couple, user: pair.user, permission: edit) == nil {
            hit = false
            _ = try await cached.checkKnown(couple: pair.couple, user: pair.user, permission: edit)
        }
        counts.withLock {
            $0.checks += 1
            $0.hits += hit ? 1 : 0
            $0.hotChecks += hot ? 1 : 0
            $0.hotHits += hot && hit ? 1 : 0
        }
    }
}
var perMinute: [(rate: Double, hotHitRate: Double)] = []
for minute in 1...minutes {
    let start = ContinuousClock.now
    try await Task.sleep(for: .seconds(60))
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let taken = counts.withLock { counts in
        defer { counts = Counts() }
        return counts
    }
    let rate = Double(taken.checks) / seconds
    let hitRate = Double(taken.hits) / Double(max(taken.checks, 1))
    let hotHitRate = Double(taken.hotHits) / Double(max(taken.hotChecks, 1))
    perMinute.append((rate, hotHitRate))
    print(
        String(
            format: "%6d %10.0f %9.1f%% %13.1f%% %16d %11d %13.0f", minute, rate, 100 * hitRate, 100 * hotHitRate,
            cache.count, cache.evictions, Double(residentBytes()) / 1e6))
}
stopCache.set()
_ = try await cacheLoad.value
listening.cancel()
if let first = perMinute.first, let last = perMinute.last {
    print(
        String(
            format: "minute %d / minute 1: rate %.2fx, hot hit rate %.2fx (goal >= 0.9x)", minutes,
            last.rate / first.rate, last.hotHitRate / max(first.hotHitRate, 1e-9)))
}

// MARK: 2. Deploys under load

/// The latency of every check made while `during` runs (15 seconds, or until it returns, if later).
func window(_ during: @escaping @Sendable () async throws -> Void) async throws -> [Double] {
    let uncached = PermissionChecker(repository: repository)
    let latencies = Mutex<[Double]>([])
    let stop = Flag()
    let checks = Task {
        try await load(workers: 32, until: stop) { random in
            let pair = pairs[Int.random(in: 0..<pairs.count, using: &random)]
            let start = ContinuousClock.now
            _ = try await uncached.check(couple: pair.couple, user: pair.user, permission: edit)
            let elapsed = ContinuousClock.now - start
            let ms = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
            latencies.withLock { $0.append(ms) }
        }
    }
    let deadline = ContinuousClock.now + .seconds(15)
    try await during()
    try await Task.sleep(until: deadline)
    stop.set()
    _ = try await checks.value
    return latencies.withLock { $0.sorted() }
}

let sql = try ProjectFiles.directory("sql")
let policy = try AccessPolicy.load(from: try ProjectFiles.directory("policies"))
let changedPolicy = try policy.granting("budget.edit", to: "viewer")

/// Runs `step` over and over for 15 seconds; returns how many times.
func repeatedly(_ step: @escaping @Sendable () async throws -> Void) -> @Sendable () async throws -> Void {
    {
        let deadline = ContinuousClock.now + .seconds(15)
        var runs = 0
        while ContinuousClock.now < deadline {
            try await step()
            runs += 1
        }
        FileHandle.standardError.write(Data("  (\(runs) runs)\n".utf8))
    }
}

print("\n2. Uncached checks, 32 at a time, while deploying")
print("window                                   checks/s      p99 ms   slowest ms")
let alone = try await window {}
let migrating = try await window(
    repeatedly {
        let applied = try await MigrationRunner.load(from: sql).migrate(pool)
        precondition(applied.isEmpty, "the benchmark's database is migrated: a migrate run applies nothing")
        try await policy.apply(pool, force: false)
    })
let changed = Flag()
let changing = try await window(
    repeatedly {
        try await (changed.isSet ? policy : changedPolicy).apply(pool)
        changed.set(!changed.isSet)
    })
try await policy.apply(pool)

func p99(_ sorted: [Double]) -> Double { sorted[min(sorted.count - 1, sorted.count * 99 / 100)] }
for (label, latencies) in [
    ("checks alone", alone), ("no-op rbac migrate, repeatedly", migrating),
    ("policy changes, repeatedly", changing),
] {
    let ratio = label == "checks alone" ? "" : String(format: "   slowest %.2fx alone", latencies.last! / alone.last!)
    let figures = String(
        format: "%10.0f %11.2f %12.2f", Double(latencies.count) / 15, p99(latencies), latencies.last!)
    print(label.padding(toLength: 38, withPad: " ", startingAt: 0) + figures + ratio)
}
await pool.close()
