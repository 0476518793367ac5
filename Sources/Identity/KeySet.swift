import Foundation
import OutboundHTTP
import Secrets

/// The usable keys of a JWKS document (RFC 7517). A key rbac cannot use (an encryption key, an RSA key under
/// 2048 bits, an unknown type) is left out and named in `skipped`; the others still work.
public struct KeySet: Sendable {
    public let keys: [VerificationKey]
    public let skipped: [String]

    public init(keys: [VerificationKey], skipped: [String] = []) {
        self.keys = keys
        self.skipped = skipped
    }

    /// Reads a JWKS document; throws when it is not one (not JSON, no `keys` array), not when single keys fail.
    public init(jwks data: some Collection<UInt8>) throws(KeyError) {
        guard let document = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any],
            let entries = document["keys"] as? [Any]
        else { throw KeyError("not a JWKS document: a JSON object with a \"keys\" array") }
        var keys: [VerificationKey] = []
        var skipped: [String] = []
        for entry in entries {
            guard let fields = entry as? [String: Any] else {
                skipped.append("an entry that is not an object")
                continue
            }
            do { keys.append(try VerificationKey.jwk(fields)) } catch { skipped.append(error.description) }
        }
        self.init(keys: keys, skipped: skipped)
    }

    /// The keys that may have signed a token with this header: the one with its `kid`, or without a `kid` every
    /// key of its algorithm.
    func candidates(id: String?, algorithm: String) -> [VerificationKey] {
        if let id { return keys.filter { $0.id == id } }
        return keys.filter { $0.algorithm.rawValue == algorithm }
    }
}

/// Where a JWKS comes from: a file or an HTTPS URL.
public enum KeySetLocation: Sendable, CustomStringConvertible {
    case file(String)
    case url(URL)

    public var description: String {
        switch self {
        case .file(let path): path
        case .url(let url): url.absoluteString
        }
    }
}

/// The identity provider's current keys, fetched again when their lifetime ends (the answer's
/// `Cache-Control: max-age`, kept within `lifetimeBounds`; a file is read again as often) and at once when a
/// token names a `kid` the set lacks, at most once per `refetchInterval`. A failed fetch keeps the last good set,
/// so a provider's outage never locks out its users while their keys are known; a key withdrawn from the
/// document stops verifying at the next fetch.
public actor KeySetCache {
    public typealias Fetch = @Sendable () async throws -> (body: [UInt8], maxAge: Duration?)

    private let fetch: Fetch
    private let lifetimeBounds: ClosedRange<Duration>
    private let defaultLifetime: Duration
    private let refetchInterval: Duration
    private let clock = ContinuousClock()
    private let report: @Sendable (String) -> Void

    private var current: KeySet?
    private var expires: ContinuousClock.Instant?
    private var lastRefetch: ContinuousClock.Instant?
    private var loading: Task<Void, Never>?

    public init(
        fetch: @escaping Fetch, lifetimeBounds: ClosedRange<Duration> = .seconds(60)...(.seconds(86_400)),
        defaultLifetime: Duration = .seconds(600), refetchInterval: Duration = .seconds(10),
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.fetch = fetch
        self.lifetimeBounds = lifetimeBounds
        self.defaultLifetime = defaultLifetime
        self.refetchInterval = refetchInterval
        self.report = report
    }

    /// The cache of a file or a URL's keys; a URL is fetched with `http`.
    public init(
        _ location: KeySetLocation, http: OutboundHTTP,
        lifetimeBounds: ClosedRange<Duration> = .seconds(60)...(.seconds(86_400)),
        refetchInterval: Duration = .seconds(10), report: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.init(
            fetch: {
                switch location {
                case .file(let path):
                    guard let data = FileManager.default.contents(atPath: path) else {
                        throw KeyError("cannot read \(path)")
                    }
                    return (Array(data), nil)
                case .url(let url):
                    let response = try await http.get(url, accept: "application/jwk-set+json, application/json")
                    guard response.status == 200 else {
                        throw KeyError("\(url.absoluteString) answered \(response.status)")
                    }
                    return (response.body, response.maxAge)
                }
            }, lifetimeBounds: lifetimeBounds, refetchInterval: refetchInterval, report: report)
    }

    /// Loads the keys now; throws when the first load fails, so that `serve` can refuse to start without keys.
    public func load() async throws {
        let (body, maxAge) = try await fetch()
        install(try KeySet(jwks: body), maxAge: maxAge)
    }

    /// The keys that may have signed a token with this header, fetching the set again when it is stale or lacks
    /// the `kid`.
    func candidates(id: String?, algorithm: String) async -> [VerificationKey] {
        if let expires, clock.now >= expires { await reload() }
        var found = current?.candidates(id: id, algorithm: algorithm) ?? []
        if found.isEmpty, id != nil, lastRefetch.map({ clock.now - $0 >= refetchInterval }) ?? true {
            lastRefetch = clock.now
            await reload()
            found = current?.candidates(id: id, algorithm: algorithm) ?? []
        }
        return found
    }

    /// One fetch at a time: callers that arrive while one runs wait for it.
    private func reload() async {
        if let loading { return await loading.value }
        let task = Task {
            do {
                let (body, maxAge) = try await fetch()
                install(try KeySet(jwks: body), maxAge: maxAge)
            } catch {
                // The last good keys stay; try again after the shortest lifetime.
                expires = clock.now + lifetimeBounds.lowerBound
                report("could not refresh the identity provider's keys (keeping the last good ones): \(error)")
            }
        }
        loading = task
        await task.value
        loading = nil
    }

    private func install(_ keys: KeySet, maxAge: Duration?) {
        current = keys
        let lifetime = min(max(maxAge ?? defaultLifetime, lifetimeBounds.lowerBound), lifetimeBounds.upperBound)
        expires = clock.now + lifetime
        if !keys.skipped.isEmpty { report("keys left out of the JWKS: \(keys.skipped.joined(separator: "; "))") }
    }
}
