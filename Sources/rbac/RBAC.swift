import ArgumentParser
import Collaboration
import Foundation
import Postgres
import Secrets

@main
struct RBAC: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rbac",
        abstract: "Roles and permissions for couples and their collaborators, kept in PostgreSQL.",
        discussion: """
            With no database configured (--database-url, DATABASE_URL or PG* variables), rbac uses a local \
            PostgreSQL cluster of its own, created and started on first use; it says where.

            Exit codes:
              0  success
              1  denied, or a negative answer
              2  usage error (bad arguments or input)
              3  not found
              4  conflict (last owner, token already used, duplicate, changed
                 migration, a database not migrated yet, a budget, role or
                 couple limit reached, a role still held, the primary
                 scenario deleted, a message being sent)
              5  database unavailable (unreachable, refusing the login, or
                 a lock held past 10 s, or past --lock-timeout)

            With --json, a failure is one line of JSON on stderr: {"error": {"code", "message"}}, the code as \
            the HTTP API gives it; so is a full page's hint of where the next starts: {"next_after": PLACE}.

            Example: rbac grant --couple C --user pia@example.com --role planner
            """,
        version: RBACVersion.current,
        subcommands: [
            Migrate.self, Couples.self, Users.self, Grant.self, Revoke.self, Suspend.self, Reactivate.self,
            Members.self, Check.self, Invite.self, Invitations.self, Redeem.self, TransferOwnership.self, Leave.self,
            Audit.self, Roles.self, Policy.self, Serve.self, Keys.self, Webhooks.self, Outbox.self, Deliver.self,
            Sweep.self, DeliveryKeyCommand.self, BudgetCommand.self,
        ]
    )

    /// Parses the arguments, runs the command, and turns every failure into one line on stderr and an exit code.
    static func main() async {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exit(reporting: error)
        }
        if let refusal = OptionsGivenOnce.refusal(of: CommandLine.arguments.dropFirst(), to: type(of: command)) {
            fail(CommandFailure(.usage, refusal), usage: type(of: command))
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as CommandFailure {
            fail(failure)
        } catch let error as any CodedError {
            // Refused before any database work (an amount that is not one, say): mapped as CommandContext maps it.
            fail(CommandFailure(error), usage: type(of: command))
        } catch let error as ValidationError {
            // An argument found malformed once the command runs. Not ArgumentParser's report, which would give
            // the usage of `rbac` itself, not of the command.
            fail(CommandFailure(.usage, error.message), usage: type(of: command))
        } catch {
            exit(reporting: error)
        }
    }

    /// ArgumentParser's report of a parsing error (with the command's usage), help, or an exit it was asked for.
    /// Its first line says what failed as `fail` does ("rbac: ..."), and shows the characters an argument echoed
    /// in it holds escaped: ArgumentParser writes them as typed, and an escape sequence would reach the terminal.
    private static func exit(reporting error: any Error) -> Never {
        let code = exitCode(for: error)
        var message = fullMessage(for: error)
        if code == .success {
            if !message.isEmpty { print(redactingSecrets(in: message)) }
            Foundation.exit(0)
        }
        let said = Self.message(for: error)
        let failed = Self._errorPrefix + said
        if message.hasPrefix(failed) { message = "rbac: \(visible(said))" + message.dropFirst(failed.count) }
        message = redactingSecrets(in: message)
        if errorsAsJSON, code == .validationFailure {
            // The option's help says what it takes where the error only says what it does not: kept, in one line.
            let help = message.split(separator: "\n").first { $0.hasPrefix("Help:") }
                .map { ". " + $0.split(separator: " ").joined(separator: " ") }
            fail(CommandFailure(.usage, said + (help ?? "")))
        }
        if !message.isEmpty { printError(message) }
        Foundation.exit(code == .validationFailure ? ExitStatus.usage.rawValue : code.rawValue)
    }

    /// An argument echoed back may be a secret typed in the wrong place: a --database-url with a password, or an
    /// invitation link where an id belongs. Standard error is often kept in a log.
    private static func redactingSecrets(in text: String) -> String {
        SecretToken.redacting(in: PostgresConfiguration.redactingPasswords(in: text))
    }

    /// Whether the command line asks for JSON (`--json` before any `--`): then a failure is JSON as well.
    private static let errorsAsJSON = CommandLine.arguments.dropFirst().prefix { $0 != "--" }.contains("--json")

    /// Writes the failure as one line: libpq's messages span lines, and one that quotes what was typed or stored
    /// (a refusal from SQL, say) may hold control characters, shown escaped, or escaped as JSON escapes them.
    /// A usage error that `command` found in its arguments as it ran is followed, without --json, by the
    /// command's usage and where its help is, as ArgumentParser follows one it finds while parsing.
    private static func fail(_ failure: CommandFailure, usage command: (any ParsableCommand.Type)? = nil) -> Never {
        let line = failure.message.split(whereSeparator: { $0.isNewline || $0 == "\t" }).joined(separator: " ")
        let message = redactingSecrets(in: line)
        if errorsAsJSON, let json = try? JSONEncoder.rbac().encode(ErrorBody(code: failure.code, message: message)) {
            printError(String(decoding: json, as: UTF8.self))
        } else {
            printError("rbac: \(visible(message))")
            if failure.status == .usage, let command, let names = names(down: command) {
                printError(
                    "Usage: \(usageString(for: command).replacingOccurrences(of: "\n", with: "\n       "))\n"
                        + "  See '\(names.joined(separator: " ")) --help' for more information.")
            }
        }
        Foundation.exit(failure.status.rawValue)
    }

    /// The command names from `from` down to `command`, as its help gives them; nil if it is not below `from`.
    static func names(down command: any ParsableCommand.Type, from: any ParsableCommand.Type = RBAC.self)
        -> [String]?
    {
        if ObjectIdentifier(from) == ObjectIdentifier(command) { return [from._commandName] }
        for subcommand in from.configuration.subcommands {
            if let below = names(down: command, from: subcommand) { return [from._commandName] + below }
        }
        return nil
    }
}

enum RBACVersion {
    static let current = "0.1.0"
}
