import ArgumentParser
import Collaboration
import Foundation

extension RBAC {
    struct Roles: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Roles: the policy's, and those a couple defines for itself.",
            discussion: """
                A couple's own role grants permissions of the registry (rbac roles lists them). Authoring one \
                needs roles.manage and every permission it grants; giving one (grant, invite) needs roles.assign \
                and every permission it grants. Names are lower-case letters and underscores, unique in the \
                couple and unlike the policy's. A couple defines at most \(CoupleRole.mostPerCouple) roles.

                Example: rbac roles create --couple C --name mom --description "May view the guests and the \
                budget" --permission guests.view --permission budget.view
                """,
            subcommands: [List.self, Create.self, Edit.self, Delete.self], defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The policy's roles, or with --couple every role its members can hold.",
                discussion: "Example: rbac roles list --couple C")
            @Option(help: "List the roles of this couple: the policy's, then its own.") var couple: String?
            @OptionGroup var acting: ActingOptions

            func validate() throws { _ = try couple.map(Parse.couple) }

            func run() async throws {
                guard let couple else {
                    return try await CommandContext.run(acting.database) { context in
                        let roles = try await context.permissions.roles()
                        try acting.output.print(
                            roles,
                            Table(
                                headers: ["ROLE", "MAY GIVE", "PERMISSIONS"],
                                rows: roles.map {
                                    [
                                        $0.name.rawValue, $0.grants.map(\.rawValue).joined(separator: ","),
                                        $0.permissions.map(\.rawValue).joined(separator: " "),
                                    ]
                                }
                            ).rendered)
                    }
                }
                try await acting.run { context, actor in
                    let roles = try await context.permissions.roles(of: try Parse.couple(couple), as: actor)
                    try acting.output.print(roles, Roles.table(roles))
                }
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Define a role of the couple's own.",
                discussion: """
                    Example: rbac roles create --couple C --name florist --description "Sees the budget" \
                    --permission budget.view
                    """)
            @OptionGroup var role: CoupleRoleOptions
            @Option(help: "What the role is for, shown where it is given and on invitation pages.")
            var description: String
            @Option(help: "A permission it grants (repeat for several).") var permission: [String] = []
            @OptionGroup var acting: ActingOptions

            func validate() throws { _ = try Roles.permissions(permission) }

            func run() async throws {
                try await acting.run { context, actor in
                    let created = try await context.permissions.createRole(
                        try role.roleName(), in: try role.coupleID(), description: description,
                        permissions: try Roles.permissions(permission), as: actor)
                    try acting.output.print(created, Roles.table([created]))
                }
            }
        }

        struct Edit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change a couple's own role: its description, what it grants, or both.",
                discussion: """
                    --permission replaces what the role grants (--no-permissions: with nothing); its holders get \
                    the new set at once.

                    Example: rbac roles edit --couple C --name mom --permission guests.view
                    """)
            @OptionGroup var role: CoupleRoleOptions
            @Option(help: "Its new description.") var description: String?
            @Option(help: "A permission it grants from now on (repeat; replaces the set).") var permission: [String] =
                []
            @Flag(help: "It grants nothing from now on; its holders keep it.") var noPermissions = false
            @OptionGroup var acting: ActingOptions

            func validate() throws {
                _ = try Roles.permissions(permission)
                guard description != nil || !permission.isEmpty || noPermissions else {
                    throw ValidationError("give what to change: --description, --permission or --no-permissions")
                }
                guard !(noPermissions && !permission.isEmpty) else {
                    throw ValidationError("--permission and --no-permissions cannot go together")
                }
            }

            func run() async throws {
                try await acting.run { context, actor in
                    let edited = try await context.permissions.editRole(
                        try role.roleName(), in: try role.coupleID(), description: description,
                        permissions: permission.isEmpty && !noPermissions ? nil : try Roles.permissions(permission),
                        as: actor)
                    try acting.output.print(edited, Roles.table([edited]))
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Delete a couple's own role.",
                discussion: """
                    A role someone holds (or a pending invitation names) needs --reassign.

                    Example: rbac roles delete --couple C --name mom --reassign viewer
                    """)
            @OptionGroup var role: CoupleRoleOptions
            @Option(help: ArgumentHelp("Move its members and pending invitations to this role.", valueName: "role"))
            var reassign: String?
            @OptionGroup var acting: ActingOptions

            func validate() throws { _ = try reassign.map { try Parse.name($0, as: RoleName.self) } }

            func run() async throws {
                try await acting.run { context, actor in
                    let (couple, name) = (try role.coupleID(), try role.roleName())
                    try await context.permissions.deleteRole(
                        name, in: couple, reassign: try reassign.map { try Parse.name($0) }, as: actor)
                    let moved = reassign.map { "; its members now hold \($0)" } ?? ""
                    try acting.output.print(
                        ["deleted": name.rawValue], "Deleted role \(name) of couple \(idText(couple))\(moved)")
                }
            }
        }

        /// Which couple's own role a verb is about.
        struct CoupleRoleOptions: ParsableArguments {
            @Option(help: "The couple's id.") var couple: String
            @Option(help: "The role's name: lower-case letters and underscores.") var name: String

            func validate() throws {
                _ = try coupleID()
                _ = try roleName()
            }

            func coupleID() throws -> UUID { try Parse.couple(couple) }

            func roleName() throws -> RoleName { try Parse.name(name) }
        }

        static func permissions(_ names: [String]) throws -> [Permission] { try names.map { try Parse.name($0) } }

        static func table(_ roles: [CoupleRole]) -> String {
            Table(
                headers: ["ROLE", "DEFINED BY", "PERMISSIONS", "DESCRIPTION"],
                rows: roles.map {
                    [
                        $0.name.rawValue, $0.coupleDefined ? "couple" : "policy",
                        $0.permissions.map(\.rawValue).joined(separator: " "), $0.description,
                    ]
                }
            ).rendered
        }
    }
}
