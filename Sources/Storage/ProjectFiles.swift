import Foundation

/// Finds the project's data directories (`sql/`, `policies/`) at run time.
///
/// Looked for, in order: under `$RBAC_HOME`; walking up from the executable (a build in `.build/` finds the
/// checkout; an install in `PREFIX/bin` finds `PREFIX/share/rbac`); the current directory.
public enum ProjectFiles {
    public static func directory(_ name: String) throws -> URL {
        for root in candidateRoots() {
            let url = root.appendingPathComponent(name, isDirectory: true)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
                return url
            }
        }
        throw ProjectFilesError(name: name)
    }

    private static func candidateRoots() -> [URL] {
        var roots: [URL] = []
        if let home = ProcessInfo.processInfo.environment["RBAC_HOME"], !home.isEmpty {
            roots.append(URL(fileURLWithPath: home))
        }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        if let executable = Bundle.main.executableURL {
            directory = executable.resolvingSymlinksInPath().deletingLastPathComponent()
        }
        while directory.path != "/" {
            roots.append(directory)
            roots.append(directory.appendingPathComponent("share/rbac"))
            directory.deleteLastPathComponent()
        }
        roots.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        return roots
    }
}

public struct ProjectFilesError: Error, CustomStringConvertible {
    public let name: String
    public var description: String {
        "cannot find the \(name)/ directory; set RBAC_HOME to the directory that contains it"
    }
}
