import ArgumentParser
import Foundation
import Secrets

/// `--delivery-key-file`: the key that seals webhook secrets (and opens them to sign deliveries). The database
/// never sees it.
struct DeliveryKeyOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            """
            File holding the delivery key, 64 hexadecimal digits (default: $RBAC_DELIVERY_KEY, else the file \
            $RBAC_DELIVERY_KEY_FILE names).
            """, valueName: "path"))
    var deliveryKeyFile: String?

    /// The key, or nil when none is configured.
    func key(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DeliveryKey? {
        try Self.load(file: deliveryKeyFile, environment)
    }

    /// The key of `file`, else of $RBAC_DELIVERY_KEY, else of the file $RBAC_DELIVERY_KEY_FILE names; nil when
    /// none is configured.
    static func load(file: String?, _ environment: [String: String]) throws -> DeliveryKey? {
        if let path = file ?? environment["RBAC_DELIVERY_KEY_FILE"].flatMap({ $0.isEmpty ? nil : $0 }) {
            return try key(file: path)
        } else if let value = environment["RBAC_DELIVERY_KEY"], !value.isEmpty {
            return try key(hex: value, from: "RBAC_DELIVERY_KEY")
        }
        return nil
    }

    /// The key the file at `path` holds.
    static func key(file path: String) throws -> DeliveryKey {
        try key(hex: try SecretFile.read(path, "delivery key"), from: "the delivery key file \(path)")
    }

    private static func key(hex text: String, from source: String) throws -> DeliveryKey {
        do {
            return try DeliveryKey(hex: text.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            throw CommandFailure(.usage, "\(source): \(error.description) (make one with: openssl rand -hex 32)")
        }
    }

    /// The key; refuses when none is configured.
    func required() throws -> DeliveryKey {
        guard let key = try key() else {
            throw CommandFailure(
                .usage,
                """
                no delivery key: pass --delivery-key-file PATH or set RBAC_DELIVERY_KEY (64 hexadecimal digits; \
                make one with: openssl rand -hex 32)
                """)
        }
        return key
    }
}
