import ArgumentParser
import Collaboration
import Foundation
import Postgres
import Storage

extension RBAC {
    struct Policy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check, test and apply the access policy in policies/.",
            discussion: "Example: rbac policy test",
            subcommands: [Validate.self, Test.self, Apply.self])

        /// Where the policy files are: --dir, else the project's policies/.
        struct Location: ParsableArguments {
            @Option(help: ArgumentHelp("The policy directory (default: the project's policies/).", valueName: "dir"))
            var dir: String?

            func directory() throws -> URL {
                if let dir { return URL(fileURLWithPath: dir) }
                return try ProjectFiles.directory("policies")
            }

            /// policy.json as it is now. Apply checks and applies what one reading gave: a file replaced between
            /// two readings would have had one version checked and the other applied.
            func policyFile() throws -> Data {
                try read(AccessPolicy.policyFileName) { try Data(contentsOf: $0) }
            }

            func roles() throws -> [RoleDefinition] { try roles(in: policyFile()) }

            func roles(in policyFile: Data) throws -> [RoleDefinition] {
                try PolicyDocument.decode(policyFile, named: AccessPolicy.policyFileName).flattened()
            }

            /// The file `name` of the directory, loaded; one that cannot be read is named. What a document holds
            /// amiss is thrown as `load` says it.
            func read<T>(_ name: String, _ load: (URL) throws -> T) throws -> T {
                let file = try directory().appendingPathComponent(name)
                do {
                    return try load(file)
                } catch let error as CollaborationError {
                    throw error
                } catch {
                    throw CommandFailure(.usage, "cannot read \(file.path)")
                }
            }
        }

        struct Validate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Check policy.json without a database: names, unknown permissions or roles, cycles.",
                discussion: "Example: rbac policy validate --dir policies")
            @OptionGroup var location: Location
            @OptionGroup var output: OutputOptions

            func run() throws {
                struct Valid: Encodable {
                    let valid = true
                    let roles: [String]
                }
                let roles: [String]
                do {
                    roles = try location.roles().map(\.name.rawValue)
                } catch {
                    throw CommandFailure(error)
                }
                try output.print(
                    Valid(roles: roles),
                    "The policy is valid: \(roles.count) roles (\(roles.joined(separator: ", "))).")
            }
        }

        struct Test: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Run the policy tests in tests.json against policy.json (exit 1 if any fails).",
                discussion: """
                    tests.json is a list of expectations, or {"couple_roles": {...}, "tests": [...]} whose \
                    couple_roles define roles a couple could define ({"mom": {"permissions": ["guests.view"]}}) \
                    for the tests to name, given by the database's rules (roles.assign and every permission).

                    Example: rbac policy test --json
                    """)
            @OptionGroup var location: Location
            @OptionGroup var output: OutputOptions

            func run() throws {
                let results: [(PolicyTest, Bool)]
                do {
                    let roles = try location.roles()
                    results = try location.read("tests.json", PolicyTestFile.load).results(in: roles)
                } catch {
                    throw CommandFailure(error)
                }
                let failed = results.filter { !$0.1 }.count
                if output.json {
                    struct Result: Encodable {
                        let description: String
                        let passed: Bool
                    }
                    try printJSON(results.map { Result(description: $0.0.description, passed: $0.1) })
                } else {
                    for (test, passed) in results {
                        print("\(passed ? "ok" : "not ok") - \(visible(test.description))")
                    }
                    print("\(results.count - failed) passed, \(failed) failed")
                }
                if failed > 0 { throw ExitCode(ExitStatus.denied.rawValue) }
            }
        }

        struct Apply: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "Apply the policy to the database (rbac migrate does this too); nothing changes if it is refused.",
                discussion: "Example: rbac policy apply --actor-label deploy")
            @OptionGroup var location: Location
            @OptionGroup var lockWaits: LockTimeoutOptions
            @OptionGroup var options: OperatorOptions

            func run() async throws {
                let policy: AccessPolicy
                do {
                    let file = try location.policyFile()
                    _ = try location.roles(in: file)  // refuses what is not UTF-8, too
                    policy = try AccessPolicy(
                        scripts: AccessPolicy.scripts(in: location.directory()),
                        policyJSON: String(decoding: file, as: UTF8.self))
                } catch {
                    throw CommandFailure(error)
                }
                // Its --lock-timeout bounds its statements once it holds the advisory lock, for which a second run
                // waits as long as the first takes.
                try await options.run(lockWaits: nil) { context in
                    do {
                        try await policy.apply(context.pool, lockTimeout: lockWaits.duration)
                    } catch let error as PostgresError {
                        throw lockWaits.failure(error, during: "applying the access policy", undone: "it was not")
                            ?? error
                    }
                    let roles = try await context.permissions.roles().count
                    try options.output.print(["roles": roles], "Applied the policy: \(roles) roles.")
                }
            }
        }
    }
}
