import Foundation
import Secrets

/// One numbered SQL file from `sql/`, such as `0001_collaboration.sql`: tables, columns, indexes, data changes
/// and drops, applied once.
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let fileName: String
    public let sql: String
    /// SHA-256 of the file's bytes, in hex: an applied migration whose file changed is refused.
    public let checksum: String

    public init(fileName: String, contents: Data) throws {
        guard let match = fileName.wholeMatch(of: /(\d{4})_([a-z0-9_]+)\.sql/), let version = Int(match.1) else {
            throw MigrationError.badFileName(fileName)
        }
        guard let sql = String(data: contents, encoding: .utf8) else { throw MigrationError.notUTF8(fileName) }
        self.version = version
        self.name = String(match.2)
        self.fileName = fileName
        self.sql = sql
        self.checksum = Digest.sha256(contents).hexString
    }

    /// Every `NNNN_name.sql` in `directory`, ordered by number. Numbers must be unique.
    public static func load(from directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError.directoryUnreadable(directory.path)
        }
        let migrations = try names.filter { $0.hasSuffix(".sql") }.sorted().map { name in
            try Migration(fileName: name, contents: Data(contentsOf: directory.appendingPathComponent(name)))
        }
        for (previous, next) in zip(migrations, migrations.dropFirst()) where previous.version == next.version {
            throw MigrationError.duplicateVersion(previous.fileName, next.fileName)
        }
        guard !migrations.isEmpty else { throw MigrationError.directoryUnreadable(directory.path) }
        return migrations
    }
}

/// One file of `sql/functions/`: the current definitions of one concern's functions and triggers, each written
/// with `CREATE OR REPLACE`, so that applying the file again brings the database to it. Every function,
/// trigger and view has its definition in exactly one such file, and none in a migration. `CREATE OR REPLACE`
/// cannot change a function's arguments or result type: such a change needs a migration that drops the old
/// function (the definitions are applied again after it).
public struct Definition: Sendable, Equatable {
    /// The file's path under `sql/`, such as `functions/permissions.sql`.
    public let fileName: String
    public let sql: String
    public let checksum: String

    public init(fileName: String, contents: Data) throws {
        guard let sql = String(data: contents, encoding: .utf8) else { throw MigrationError.notUTF8(fileName) }
        self.fileName = fileName
        self.sql = sql
        self.checksum = Digest.sha256(contents).hexString
    }

    public static let directoryName = "functions"
    /// Applied after any other definition is (see `MigrationRunner.migrate`).
    public static let privilegesFileName = "\(directoryName)/privileges.sql"

    /// Every `*.sql` in `directory` in the order they are applied in: by name, the privileges file last.
    public static func load(from directory: URL) throws -> [Definition] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else {
            throw MigrationError.directoryUnreadable(directory.path)
        }
        let privileges = privilegesFileName.dropFirst(directoryName.count + 1)
        let ordered = names.filter { $0.hasSuffix(".sql") }.sorted {
            ($0 == privileges ? 1 : 0, $0) < ($1 == privileges ? 1 : 0, $1)
        }
        return try ordered.map { name in
            try Definition(
                fileName: "\(directoryName)/\(name)", contents: Data(contentsOf: directory.appendingPathComponent(name))
            )
        }
    }
}

public enum MigrationError: Error, Equatable, CustomStringConvertible {
    case badFileName(String)
    case notUTF8(String)
    case duplicateVersion(String, String)
    case directoryUnreadable(String)
    /// An applied migration's file no longer matches what was applied.
    case changedAfterApply(fileName: String, appliedChecksum: String, fileChecksum: String)
    /// The database has a migration this program does not know (it was migrated by a newer version).
    case unknownApplied(version: Int, name: String)
    /// `rbac migrate --citus` without `sql/citus/distribute.sql` beside the migrations.
    case noDistribution

    public var description: String {
        switch self {
        case .badFileName(let name):
            "migration file \(name) is not named NNNN_name.sql (four digits, lower-case letters, digits, underscores)"
        case .notUTF8(let name):
            "migration file \(name) is not UTF-8 text"
        case .duplicateVersion(let first, let second):
            "migration files \(first) and \(second) have the same number"
        case .directoryUnreadable(let path):
            "no SQL files found in \(path)"
        case .changedAfterApply(let fileName, let applied, let file):
            "migration \(fileName) was changed after it was applied (applied sha256 \(applied.prefix(12)), file now \(file.prefix(12))); "
                + "restore the file and put the change in a new migration"
        case .unknownApplied(let version, let name):
            "the database has migration \(String(format: "%04d", version))_\(name), which this rbac does not have; "
                + "use the rbac version that applied it"
        case .noDistribution:
            "sql/\(MigrationRunner.distributionFileName) is missing, so this rbac cannot distribute a database"
        }
    }
}
