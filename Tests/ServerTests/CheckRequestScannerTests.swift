import Collaboration
import Foundation
import Hummingbird
import Testing

@testable import Server

/// The fast path of `POST /v1/check` must read every body it accepts as JSONDecoder does, and write every answer
/// as JSONEncoder does.
@Suite("Check request scanning")
struct CheckRequestScannerTests {
    typealias CheckRequest = PermissionAPIController.CheckRequest

    static let couple = "a9f7e979-65d6-cf79-9a52-9102a973b8b9"
    static let user = "e4774cdd-a079-3f86-414e-8b9140bb6db4"
    static let usual = #"{"couple_id":"\#(couple)","user_id":"\#(user)","permission":"budget.edit"}"#

    /// Both readings of `body`: the scanner's (nil when it leaves the body to JSONDecoder) and JSONDecoder's (nil
    /// when it refuses the body), each as its four fields.
    static func readings(_ body: String) -> (scanned: [String?]?, decoded: [String?]?) {
        func fields(_ request: CheckRequest) -> [String?] {
            [request.coupleID, request.userID, request.permission, request.minRevision.map(String.init)]
        }
        let scanned = CheckRequest(scanning: ByteBuffer(string: body)).map(fields)
        let decoded = (try? JSONDecoder().decode(CheckRequest.self, from: Data(body.utf8))).map(fields)
        return (scanned, decoded)
    }

    @Test(
        "the bodies backends send are scanned, and read as JSONDecoder reads them",
        arguments: [
            usual,
            #"{"couple_id":"\#(couple)","user_id":"\#(user)","permission":"budget.edit","min_revision":42}"#,
            #"{"min_revision":null,"permission":"x.y","user_id":"\#(user)","couple_id":"\#(couple)"}"#,
            #"{"couple_id":"\#(couple)","user_id":"\#(user)","permission":"p","min_revision":-9223372036854775808}"#,
            #"{"couple_id":"\#(couple)","user_id":"\#(user)","permission":"p","min_revision":0}"#,
            #"{"couple_id":"\#(couple)","user_id":"\#(user)","permission":"p","min_revision":-0}"#,
            " {\n\t\"couple_id\" : \"c\" ,\r\n \"user_id\":\"u\", \"permission\" :\"'); drop table users; --\" } \n",
            #"{"couple_id":"","user_id":"not a uuid","permission":""}"#,
        ])
    func scansTheUsualShape(_ body: String) {
        let (scanned, decoded) = Self.readings(body)
        #expect(scanned != nil)
        #expect(scanned == decoded)
    }

    @Test(
        "any other body is left to JSONDecoder",
        arguments: [
            "", "{}", "[]", "null", "{not json", #"{"couple_id":"a","user_id":"b"}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","extra":1}"#,
            #"{"couple_id":"a","couple_id":"z","user_id":"b","permission":"c"}"#,
            #"{"couple_id":"a\u0062","user_id":"b","permission":"c"}"#,
            #"{"couple_id":"a\"b","user_id":"b","permission":"c"}"#,
            #"{"couple_id":"é","user_id":"b","permission":"c"}"#,
            "{\"couple_id\":\"a\tb\",\"user_id\":\"b\",\"permission\":\"c\"}",
            #"{"couple_id":"a","user_id":"b","permission":null}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","min_revision":1.0}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","min_revision":1e3}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","min_revision":01}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","min_revision":9223372036854775808}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","min_revision":"1"}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c","min_revision":1,"min_revision":null}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c",}"#,
            #"{"couple_id":"a","user_id":"b","permission":"c"}x"#,
            #"{"couple_id":"a","user_id":"b","permission":"c"}{}"#,
            "\u{FEFF}" + usual,
        ])
    func leavesTheRestToJSONDecoder(_ body: String) {
        #expect(Self.readings(body).scanned == nil)
    }

    @Test("whatever the scanner accepts of 20,000 mangled bodies, JSONDecoder reads the same")
    func agreesWithJSONDecoderOnMangledBodies() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ -.0123456789eE+nul"#.utf8) + [0x09, 0x0A, 0xC3, 0xA9]
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = Array(
                #"{"couple_id":"c","user_id":"u","permission":"p","min_revision":12}"#.utf8)
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                let byte = alphabet.randomElement(using: &generator)!
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes.insert(byte, at: at)
                case 1: bytes.remove(at: at)
                default: bytes[at] = byte
                }
            }
            let body = String(decoding: bytes, as: UTF8.self)
            let (scanned, decoded) = Self.readings(body)
            if let scanned {
                accepted += 1
                #expect(scanned == decoded, "\(body)")
            }
        }
        // Whitespace and digits leave many mangled bodies valid: the comparison above is not vacuous.
        #expect(accepted > 500)
    }

    @Test("answers are written as JSONEncoder writes them")
    func writesAsJSONEncoder() throws {
        for allowed in [true, false] {
            for revision in [nil, 0, 7, -1, Int64.max] as [Int64?] {
                let check = PermissionCheck(allowed: allowed, revision: revision)
                let written = CheckAnswer.body(check)
                #expect(Array(written.readableBytesView) == Array(try PermissionAPIController.encoder.encode(check)))
            }
        }
    }
}
