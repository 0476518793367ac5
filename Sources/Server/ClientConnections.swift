import HummingbirdCore
import Prometheus

/// Takes client connections while fewer than `limit` are open; the rest wait in the listener's queue until one
/// closes. Each connection holds a file descriptor, as each of the database pool's does: clients that merely
/// keep connections open (an idle connection lasts `--idle-timeout`) could otherwise take every descriptor the
/// process may open, and every request would then fail for want of a database connection. Counted on the
/// listener's event loop (Hummingbird calls both methods there), and shown as `rbac_http_connections` beside
/// `rbac_http_connections_max`.
struct ClientConnections: AvailableConnectionsDelegate {
    let limit: Int
    private let gauge: Gauge
    private var open = 0

    init(limit: Int, registry: PrometheusCollectorRegistry) {
        self.limit = limit
        gauge = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "rbac_http_connections", unitName: "", helpText: "Client connections open."))
        registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "rbac_http_connections_max", unitName: "",
                helpText: "Client connections taken at once at most (--max-connections); the rest wait.")
        ).set(Int64(limit))
    }

    mutating func connectionOpened() {
        open += 1
        gauge.set(Int64(open))
    }

    mutating func connectionClosed() {
        open -= 1
        gauge.set(Int64(open))
    }

    func isAcceptingNewConnections() -> Bool { open < limit }
}
