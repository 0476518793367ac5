import ArgumentParser
import Budget
import Collaboration
import Foundation

extension RBAC.BudgetCommand {
    struct Payments: AsyncParsableCommand, DeletableBudgetRecord {
        static let record = BudgetRecord.payment
        static let configuration = CommandConfiguration(
            abstract: "Payments made against expenses, and what each expense still owes.",
            discussion: "Example: rbac budget payments add E --couple C --amount 400 --paid-at 2026-03-01",
            subcommands: [Status.self, List.self, Add.self, Delete<Payments>.self])

        static func table(_ payments: [ExpensePayment]) -> Table {
            Table(
                headers: ["ID", "AMOUNT", "PAID"],
                rows: payments.map { [idText($0.id), Money.text($0.amount), "\($0.paidAt)"] })
        }

        struct Status: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Every expense: paid, remaining, unpaid / partial / paid / overpaid, overdue.")
            @OptionGroup var options: Options
            @OptionGroup var page: PageOptions

            func run() async throws {
                let statuses = try await options.run { budget, actor in
                    try await page.read(id: \.expenseID) { try await budget.paymentStatuses(page: $0, as: actor) }
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

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List one expense's payments.")
            @OptionGroup var options: Options
            @Option(help: "The expense's id.") var expense: String
            @OptionGroup var page: PageOptions

            func run() async throws {
                let expense = try Parse.id(expense, "expense")
                let payments = try await options.run { budget, actor in
                    try await page.read(id: \.id) { try await budget.payments(expense: expense, page: $0, as: actor) }
                }
                try options.output.print(payments, Payments.table(payments).rendered)
            }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Record a payment against an expense.")
            @Argument(help: "The expense's id.") var expense: String
            @Option(parsing: .unconditional, help: "The amount paid.") var amount: String
            @Option(help: "When it was paid (YYYY-MM-DD; default today).") var paidAt: String?
            @OptionGroup var options: Options

            func validate() throws { _ = try Expenses.day(paidAt, "--paid-at") }

            func run() async throws {
                let expense = try Parse.id(expense, "expense")
                let amount = try Money.parse(amount, "--amount")
                let paidAt = try Expenses.day(paidAt, "--paid-at")
                let payment = try await options.run {
                    try await $0.recordPayment(expense: expense, amount: amount, paidAt: paidAt, as: $1)
                }
                try options.printWritten(payment, Payments.table)
            }
        }
    }
}
