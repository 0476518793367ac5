import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Payments: BudgetNoun {
        static let record = BudgetRecord.payment
        static let about = (
            abstract: "Payments made against expenses, and what each expense still owes.",
            example: "rbac budget payments add E --couple C --amount 400 --paid-at 2026-03-01"
        )
        static let verbs: [any ParsableCommand.Type] = [Status.self, Add.self]

        static let listAbstract = "List one expense's payments."
        static func list(_ budget: CoupleBudget, _ scope: OfExpense, page: PageRequest<CalendarDay>?, as actor: Actor)
            async throws -> [ExpensePayment]
        {
            try await budget.payments(expense: try Parse.id(scope.expense, "expense"), page: page, as: actor)
        }

        /// `--expense`, for one expense's payments.
        struct OfExpense: ListingScope {
            static let example = " --expense E"
            @Option(help: "The expense's id.") var expense: String
        }

        static func table(_ payments: [ExpensePayment]) -> Table {
            Table(
                headers: ["ID", "AMOUNT", "PAID"],
                rows: payments.map { [idText($0.id), Money.text($0.amount), "\($0.paidAt)"] })
        }

        struct Status: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Every expense: paid, remaining, unpaid / partial / paid / overpaid, overdue.",
                discussion: "Example: rbac budget payments status --couple C")
            @OptionGroup var options: Options
            @OptionGroup var page: PageOptions<DueAndName>

            func run() async throws {
                let statuses = try await options.run { budget, actor in
                    try await page.read(options.output) { try await budget.paymentStatuses(page: $0, as: actor) }
                }
                try options.output.print(
                    statuses,
                    Table(
                        headers: ["EXPENSE", "AMOUNT", "PAID", "REMAINING", "STATUS", "DUE", "OVERDUE"],
                        rows: statuses.map {
                            [
                                $0.name, Money.text($0.amount), Money.text($0.paid), Money.text($0.remaining),
                                $0.status.rawValue, $0.dueDate?.description ?? "", $0.isOverdue ? "yes" : "",
                            ]
                        }
                    ).rendered)
            }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Record a payment against an expense.", discussion: "Example: \(Payments.about.example)")
            @Argument(help: "The expense's id.") var expense: String
            @Option(parsing: .unconditional, help: "The amount paid.") var amount: String
            @Option(help: "When it was paid (YYYY-MM-DD; default today).") var paidAt: String?
            @OptionGroup var options: Options

            func validate() throws { _ = try Expenses.day(paidAt, "--paid-at") }

            func run() async throws {
                let expense = try Parse.id(expense, "expense")
                let amount = try Money.parse(amount, "--amount")
                let paidAt = try Expenses.day(paidAt, "--paid-at")
                try await options.write(Payments.table) {
                    try await $0.recordPayment(expense: expense, amount: amount, paidAt: paidAt, as: $1)
                }
            }
        }
    }
}
