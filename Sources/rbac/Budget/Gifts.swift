import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Gifts: BudgetNoun {
        static let record = BudgetRecord.gift
        static let about = (
            abstract: "Gifts and money owed to the couple, set against budget items.",
            example: "rbac budget gifts add \"Aunt May\" --couple C --amount 250 --item I"
        )
        static let verbs: [any ParsableCommand.Type] = [Add.self, Edit.self, Receive.self]

        static let listAbstract = "List gifts and money owed."
        static func list(_ budget: CoupleBudget, _ scope: WholeCouple, page: PageRequest<String>?, as actor: Actor)
            async throws
            -> [Gift]
        {
            try await budget.gifts(page: page, as: actor)
        }

        static func table(_ gifts: [Gift]) -> Table {
            Table(
                headers: ["ID", "FROM", "AMOUNT", "RECEIVED", "ITEM"],
                rows: gifts.map {
                    [idText($0.id), $0.from, Money.text($0.amount), $0.received ? "yes" : "", idText($0.budgetItemID)]
                })
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a gift, or money owed (until it is received: rbac budget gifts receive).",
                discussion: "Example: \(Gifts.about.example)")
            @Argument(help: "Who it is from.") var from: String
            @Option(parsing: .unconditional, help: "The amount.") var amount: String
            @Flag(help: "Already received (otherwise it is owed).") var received = false
            @Option(help: "The budget item (id) it goes towards.") var item: String?
            @OptionGroup var options: Options

            func run() async throws {
                let amount = try Money.parse(amount, "--amount")
                let item = try item.map { try Parse.id($0, "item") }
                try await options.write(Gifts.table) {
                    try await $0.recordGift(from: from, amount: amount, received: received, budgetItem: item, as: $1)
                }
            }
        }

        struct Edit: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Change who a gift is from, its amount or its item, or mark it still owed.",
                discussion: "Example: rbac budget gifts edit G --couple C --amount 300 --no-item")
            @Argument(help: "The gift's id.") var gift: String
            @Option(help: "Who it is from.") var from: String?
            @Option(parsing: .unconditional, help: "The amount.") var amount: String?
            @Option(help: "The budget item (id) it goes towards.") var item: String?
            @Flag(help: "Set it against no budget item.") var noItem = false
            @Flag(help: "Still owed: not received after all.") var owed = false
            @OptionGroup var options: Options

            func validate() throws {
                guard from != nil || amount != nil || item != nil || noItem || owed else {
                    throw ValidationError("give what to change: --from, --amount, --item, --no-item or --owed")
                }
                guard !(noItem && item != nil) else { throw ValidationError("--item and --no-item cannot go together") }
            }

            func run() async throws {
                let id = try Parse.id(gift, "gift")
                let changes = GiftEdit(
                    from: from, amount: try amount.map { try Money.parse($0, "--amount") },
                    received: owed ? false : nil,
                    budgetItem: change(try item.map { try Parse.id($0, "item") }, clear: noItem))
                try await options.write(Gifts.table) { try await $0.editGift(id, changes, as: $1) }
            }
        }

        struct Receive: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Mark money owed as received.", discussion: "Example: rbac budget gifts receive G --couple C")
            @Argument(help: "The gift's id.") var gift: String
            @OptionGroup var options: Options

            func run() async throws {
                let id = try Parse.id(gift, "gift")
                try await options.write(Gifts.table) { try await $0.editGift(id, GiftEdit(received: true), as: $1) }
            }
        }
    }
}
