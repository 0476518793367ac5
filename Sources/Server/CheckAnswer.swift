import Collaboration
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The answer to `POST /v1/check`, for the route and for `CheckFastPath`, which answers before the router: one
/// body, one set of header fields, and for the fast path, which the middleware never sees, the route's log line
/// and metrics. A differential test holds the two paths to the same bytes.
enum CheckAnswer {
    static let route = "/v1/check"

    /// Set by the fast path alone (it takes the field off every request it hands on) on a check it handed on
    /// because the database did not answer it: the router answers 503 without asking again, for the key or the
    /// check, which would double the client's wait for a database that is down or unreachable.
    static let unavailable = HTTPField.Name("Rbac-Database-Unavailable")!

    /// `{"allowed":true,"revision":7}`, as `PermissionAPIController.json` would write it without JSONEncoder's
    /// cost, leaving the revision out when it is nil as the encoder does.
    static func body(_ check: PermissionCheck) -> ByteBuffer {
        var body = ByteBuffer()
        body.writeString(check.allowed ? #"{"allowed":true"# : #"{"allowed":false"#)
        if let revision = check.revision { body.writeString(#","revision":\#(revision)"#) }
        body.writeString("}")
        return body
    }

    /// The route's response; Hummingbird adds `Content-Length`, `Date` and `Server`.
    static func response(_ check: PermissionCheck) -> Response {
        PermissionAPIController.response(json: body(check))
    }

    /// What the fast path writes: the route's fields with those Hummingbird would add.
    static func head(_ check: PermissionCheck, date: String) -> (head: HTTPResponse, body: ByteBuffer) {
        let body = body(check)
        var fields = PermissionAPIController.jsonFields
        fields[.contentLength] = String(body.readableBytes)
        fields[.date] = date
        fields[.server] = serverName
        return (HTTPResponse(status: .ok, headerFields: fields), body)
    }

    /// What the middleware records for the route's answers: the route metrics and, at debug level, the
    /// request's log line.
    static func recordAsRoute(_ timings: CountedTimings, _ logger: Logger, since started: ContinuousClock.Instant) {
        RouteMetricsMiddleware.record(timings, .post, route: route, 200, since: started)
        if logger.logLevel <= .debug {
            var logger = logger
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
            RequestLogMiddleware.log(logger, .post, route, .ok, since: started)
        }
    }
}
