import Foundation

/// Files that hold a secret (a key, a password, a client secret), read the one way: the text without the
/// whitespace around it. A refusal names the file and why it cannot be used, never what it holds.
enum SecretFile {
    static func read(_ path: String, _ what: String) throws(CommandFailure) -> String {
        guard !path.isEmpty else { throw CommandFailure(.usage, "the \(what) file's path is empty") }
        let contents: Data
        do {
            // A file handle, not Data(contentsOf:), which refuses pipes: `--jwt-secret-file <(pass show jwt)`.
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            contents = try handle.readToEnd() ?? Data()
        } catch {
            throw CommandFailure(.usage, "cannot read the \(what) file \(path): \(reason(error))")
        }
        guard let text = String(data: contents, encoding: .utf8) else {
            throw CommandFailure(.usage, "the \(what) file \(path) is not text (UTF-8)")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func reason(_ error: any Error) -> String {
        let failure = error as NSError
        let posix = failure.domain == NSPOSIXErrorDomain ? failure : failure.userInfo[NSUnderlyingErrorKey] as? NSError
        switch posix.flatMap({ $0.domain == NSPOSIXErrorDomain ? Int32($0.code) : nil }) {
        case ENOENT: return "there is no such file"
        case EACCES: return "this user may not read it"
        case EISDIR: return "it is a directory"
        case let code?: return String(cString: strerror(code)).lowercased()
        case nil: return failure.localizedDescription
        }
    }
}
