import ArgumentParser
import Collaboration
import Delivery
import Foundation
import OutboundHTTP

/// Where invitation emails go out: an SMTP server through libcurl.
struct MailOptions: ParsableArguments {
    @Option(
        name: .customLong("smtp-url"),
        help: ArgumentHelp(
            """
            The SMTP server: smtp://[user@]host:587 (STARTTLS required), smtps://host:465, or smtp+insecure://host \
            (no TLS; tests, a local relay). Without it, invitation emails wait in the outbox.
            """, valueName: "url"))
    var smtpURL: String?
    @Option(help: ArgumentHelp("File holding the SMTP password, for the URL's user.", valueName: "path"))
    var smtpPasswordFile: String?
    @Option(
        help: ArgumentHelp("The From of invitation emails, e.g. \"Wedding <no-reply@example.com>\".", valueName: "from")
    )
    var mailFrom: String?

    func validate() throws {
        guard (smtpURL == nil) == (mailFrom == nil) else {
            throw ValidationError("--smtp-url and --mail-from go together")
        }
        do { _ = try settings(caFile: nil) } catch { throw ValidationError(error.message) }
    }

    /// The worker's mail settings; nil when not configured.
    func mail(caFile: String?) throws -> OutboxWorker.Mail? {
        do { return try settings(caFile: caFile) } catch { throw CommandFailure(.usage, error.message) }
    }

    private struct Refusal: Error {
        let message: String
    }

    private func settings(caFile: String?) throws(Refusal) -> OutboxWorker.Mail? {
        guard let smtpURL, let mailFrom else { return nil }
        let server: OutboundMail
        do { server = try self.server(smtpURL, caFile: caFile) } catch { throw Refusal(message: error.description) }
        do { return try OutboxWorker.Mail(server: server, from: mailFrom) } catch {
            throw Refusal(message: "--mail-from: \(error.message)")
        }
    }

    private func server(_ text: String, caFile: String?) throws(OutboundMail.Failure) -> OutboundMail {
        // Neither refusal repeats the text: it may hold a password.
        guard let url = URL(string: text) else {
            throw OutboundMail.Failure(code: nil, description: "--smtp-url is not a URL such as smtp://user@host:587")
        }
        if let refusal = URLComponents(string: text)?.serverRefusal("--smtp-url") {
            throw OutboundMail.Failure(code: nil, description: refusal)
        }
        guard url.password == nil else {
            throw OutboundMail.Failure(
                code: nil,
                description: "--smtp-url must not carry a password, which the process list shows: "
                    + "put it in a file named by --smtp-password-file")
        }
        var password: String?
        if let smtpPasswordFile {
            do { password = try SecretFile.read(smtpPasswordFile, "SMTP password") } catch {
                throw OutboundMail.Failure(code: nil, description: error.message)
            }
        }
        return try OutboundMail(server: url, username: url.user, password: password, caFile: caFile)
    }
}
