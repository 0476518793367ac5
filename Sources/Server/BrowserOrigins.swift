import Foundation
import Hummingbird
import Tenancy

/// The origins of an app's own pages (`rbac serve --cors-origin`), whose scripts may call the routes a person's
/// browser calls (`InvitationController.browserRoutes`) across origins: CORS. Only these origins, exactly; no
/// cookies, since the person's JWT travels in `Authorization`; never a service-key route, whose keys belong on
/// servers.
public struct BrowserOrigins: Sendable {
    let origins: Set<String>

    public static let none = BrowserOrigins(origins: [])

    init(origins: Set<String>) { self.origins = origins }

    /// Each origin as a browser sends it in `Origin`: a scheme (http or https), a host in lower case and a port
    /// other than the scheme's own, and nothing after (`https://app.example.com`, `http://localhost:3000`).
    public init(parsing texts: [String]) throws(BrowserOriginError) {
        origins = Set(
            try texts.map { text throws(BrowserOriginError) in
                guard let url = URLComponents(string: text), let scheme = url.scheme,
                    ["http", "https"].contains(scheme),
                    let host = url.host, !host.isEmpty, url.user == nil, url.password == nil,
                    ["", "/"].contains(url.path),
                    url.query == nil, url.fragment == nil
                else { throw BrowserOriginError(text, expected: nil) }
                if let refusal = url.serverRefusal("--cors-origin") { throw BrowserOriginError(refusal) }
                let port = url.port.flatMap {
                    ($0 == 80 && scheme == "http") || ($0 == 443 && scheme == "https") ? nil : $0
                }
                let origin = "\(scheme)://\(host.lowercased())" + (port.map { ":\($0)" } ?? "")
                guard origin == text else { throw BrowserOriginError(text, expected: origin) }
                return origin
            })
    }
}

public struct BrowserOriginError: Error, CustomStringConvertible {
    public let description: String

    init(_ value: String, expected: String?) {
        let form =
            expected.map { " as browsers send it: \($0)" }
            ?? ": a scheme, a host and maybe a port (https://app.example.com)"
        description = "--cors-origin takes an origin\(form), not \"\(value)\""
    }

    /// A refusal that says why itself (`serverRefusal`).
    init(_ refusal: String) { description = refusal }
}

/// Answers the preflights of the browser routes from an allowed origin, and lets that origin read their answers,
/// refusals included (it runs outside `APIErrorMiddleware`, which turns errors into answers). Other routes, and
/// other origins, get no CORS header: a browser then keeps the answer from the page.
struct BrowserOriginsMiddleware<Context: RequestContext>: RouterMiddleware {
    let origins: BrowserOrigins
    /// The routes' paths as the router names them (`/v1/invitations/{token}`).
    let paths: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let origin = request.headers[.origin], origins.origins.contains(origin) else {
            return try await next(request, context)
        }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            guard isBrowserRoute(context) else { return try await next(request, context) }
            return Response(
                status: .noContent,
                headers: [
                    .accessControlAllowOrigin: origin, .accessControlAllowMethods: "GET, POST",
                    .accessControlAllowHeaders: "Authorization, Content-Type, Accept",
                    .accessControlMaxAge: "600", .vary: "Origin",
                ])
        }
        var response = try await next(request, context)
        // Read after the answer: a method the route does not take is matched to it only then (a 405).
        guard isBrowserRoute(context) else { return response }
        response.headers[.accessControlAllowOrigin] = origin
        // Scripts read only the safelisted fields unless told: a 429's wait too.
        response.headers[.accessControlExposeHeaders] = "Retry-After"
        response.headers[values: .vary].append("Origin")
        return response
    }

    private func isBrowserRoute(_ context: Context) -> Bool { context.endpointPath.map(paths.contains) ?? false }
}
