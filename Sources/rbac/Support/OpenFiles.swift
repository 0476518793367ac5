import Glibc

/// How many files `rbac serve` may have open. Each client connection holds one, so the soft limit (`ulimit -n`:
/// 1,024 under systemd unless `LimitNOFILE` says otherwise) is first raised to the hard one (`ulimit -Hn`), as
/// a server's should be.
enum OpenFiles {
    /// Kept for all but client connections: the database pool (16) and the change feed's, outbound webhooks,
    /// mail and key fetches, the event loops' own, and 8 for each of some 20 Citus workers with
    /// --budget-reads-on-workers (a larger cluster's operator sets --max-connections lower).
    static let kept = 256

    /// The limit, its soft value raised to the hard one where the two differ.
    static func raisedLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return Int.max }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY, all bits set, is Int.max
    }
}
