/// Runs `body`, then `cleanup`, also when `body` throws: the `defer` of something that must be awaited, such as
/// closing a pool or releasing a lock. A failing cleanup is thrown after a successful `body`, and dropped after a
/// failed one, whose error says more. (Here because every module that opens such things imports this one.)
@discardableResult
public func ensuring<T>(_ body: () async throws -> T, finally cleanup: () async throws -> Void) async throws -> T {
    let value: T
    do {
        value = try await body()
    } catch {
        try? await cleanup()
        throw error
    }
    try await cleanup()
    return value
}
