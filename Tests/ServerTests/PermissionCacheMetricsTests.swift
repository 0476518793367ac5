import Collaboration
import Foundation
import Prometheus
import Testing

@Suite("Permission cache metrics")
struct PermissionCacheMetricsTests {
    @Test("/metrics shows the couples the cache holds and the evictions it made")
    func countsCouplesAndEvictions() throws {
        let registry = PrometheusCollectorRegistry()
        let cache = PermissionCache(capacity: 3, metrics: PrometheusMetricsFactory(registry: registry))
        let set = PermissionSet(permissions: [], revision: 1)
        for couple in (0..<5).map({ _ in UUID() }) {
            cache.store(set, couple: couple, user: UUID(), ticket: cache.ticket(for: couple))
        }
        let samples = try CacheTests.parsePrometheus(registry.emitToString())
        #expect(samples["rbac_permission_cache_couples"] == 3)
        #expect(samples["rbac_permission_cache_evictions_total"] == 2)
        cache.invalidateAll()
        #expect(try CacheTests.parsePrometheus(registry.emitToString())["rbac_permission_cache_couples"] == 0)
    }

    @Test("/metrics shows the couples of every shard together")
    func countsEveryShard() throws {
        let registry = PrometheusCollectorRegistry()
        let cache = PermissionCache(capacity: 3_000, shards: 3, metrics: PrometheusMetricsFactory(registry: registry))
        let set = PermissionSet(permissions: [], revision: 1)
        for couple in (0..<30).map({ _ in UUID() }) {
            cache.store(set, couple: couple, user: UUID(), ticket: cache.ticket(for: couple))
        }
        #expect(try CacheTests.parsePrometheus(registry.emitToString())["rbac_permission_cache_couples"] == 30)
        cache.invalidateAll()
        #expect(try CacheTests.parsePrometheus(registry.emitToString())["rbac_permission_cache_couples"] == 0)
    }
}
