import ArgumentParser
import Foundation

/// ArgumentParser keeps the last value of an option given twice: `rbac grant ... --role owner --role viewer` would
/// grant viewer, with no word of the owner asked for. A command line that gives an option of one value (or a flag)
/// twice is refused as ambiguous. Which options take one value the command's own description says, the one
/// ArgumentParser writes for `--experimental-dump-help`, so that no list kept here falls behind the commands; it is
/// read only for a line that names an option twice.
enum OptionsGivenOnce {
    /// The refusal of the first option of `command` that `line` (before a `--`) gives twice; nil when none is.
    static func refusal(of line: some Sequence<String>, to command: any ParsableCommand.Type) -> String? {
        let typed = line.prefix { $0 != "--" }.filter { $0.hasPrefix("-") }
            .map { String($0.split(separator: "=", maxSplits: 1)[0]) }
        var seen = Set<String>()
        let twice = typed.filter { !seen.insert($0).inserted }
        guard !twice.isEmpty else { return nil }
        let once = arguments(of: command).filter { !$0.isRepeating }
        for name in twice {
            guard let argument = once.first(where: { $0.names?.contains { $0.typed == name } == true }) else {
                continue
            }
            return "\(name) is given twice: give it once" + (argument.kind == "option" ? " (it takes one value)" : "")
        }
        return nil
    }

    /// ArgumentParser describes a command when asked to, found by its path.
    private static func arguments(of command: any ParsableCommand.Type) -> [Argument] {
        guard let path = RBAC.names(down: command)?.dropFirst() else { return [] }
        do {
            _ = try RBAC.parseAsRoot(Array(path) + ["--experimental-dump-help"])
        } catch {
            let description = Data(RBAC.fullMessage(for: error).utf8)
            return (try? JSONDecoder().decode(Description.self, from: description))?.command.arguments ?? []
        }
        return []
    }

    /// The parts of ArgumentParser's description of a command read here.
    private struct Description: Decodable {
        let command: Command

        struct Command: Decodable {
            let arguments: [Argument]?
        }
    }

    private struct Argument: Decodable {
        /// option, flag or positional.
        let kind: String
        let isRepeating: Bool
        let names: [Name]?
    }

    private struct Name: Decodable {
        let kind: String
        let name: String

        var typed: String { (kind == "long" ? "--" : "-") + name }
    }
}
