import Collaboration
import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Strict JSON against PostgreSQL's reader")
struct StrictJSONDifferentialTests {
    @Test(
        "documents mutated at random: strict JSON exactly when jsonb reads them, but for a key twice or a number misread"
    )
    func againstJSONB() async throws {
        let policy = try String(
            contentsOf: repositoryRoot.appendingPathComponent("policies/policy.json"), encoding: .utf8)
        let seeds = [
            #"{"couple_id":"0b5a6b53-6b8a-4c0e-9d43-3e0f2b6b1c11","user_id":"u","permission":"budget.edit"}"#,
            #"{"checks":[{"couple_id":"c","user_id":"u","permission":"p","min_revision":12}]}"#,
            #"{"name":"Venue \"Hall\"","budgeted":5000.25,"folder_id":null,"is_primary":false}"#,
            #"[1,-0.5e+3,2E-2,0,true,false,null,"\u00e9\n\t\\\/","\ud83d\ude00",{"a":[{}],"b":{"c":[]}}]"#,
            #"  {"é":"😀", "x" : [ 1 , 2 ] }  "#, policy,
            #"{"amount":5.00000000000000000000000000000000000000001,"n":-1234567890123456789012345678901234567e-3}"#,
        ]
        let alphabet = Array(#"{}[],:"\/.-+0129eEtrufalsnx"#) + [" ", "\t", "\n", "é", "😀"]
        var random = SystemRandomNumberGenerator()
        // Numbers out of even numeric's places, which mutations reach only now and then.
        var documents = [#"{"amount":5.0000000000E00000000001000001}"#, "[0.0e-99999999999]", "[1e-16384]"]
        while documents.count < 2_000 {
            var characters = Array(seeds.randomElement(using: &random)!)
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let at = Int.random(in: 0..<characters.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: characters.insert(alphabet.randomElement(using: &random)!, at: at)
                case 1: characters.remove(at: at)
                default: characters[at] = alphabet.randomElement(using: &random)!
                }
            }
            let document = String(characters)
            // PostgreSQL's text cannot hold NUL, so jsonb refuses its escape; JSON has it.
            if !document.contains(#"\u0000"#) { documents.append(document) }
        }
        let connection = try await PostgresConnection.connect(try TestDatabase.server())
        var (taken, refused, refusedAsJSON) = (0, 0, 0)
        for document in documents {
            // What jsonb said: nil when it read the document, else its SQLSTATE.
            let refusal: SQLState?
            do {
                _ = try await connection.query("SELECT \(document)::jsonb IS NOT NULL AS read")
                refusal = nil
            } catch let error as PostgresError where error.sqlState?.errorClass == "22" {
                refusal = error.sqlState
            }
            let jsonbReads = refusal == nil
            switch StrictJSON.problem(in: Array(document.utf8)) {
            case nil:
                taken += 1
                #expect(jsonbReads, "strict JSON that jsonb refuses: \(document)")
            case .malformed(let what, let byte):
                refused += 1
                #expect(!jsonbReads, "jsonb reads what was refused (\(what) at \(byte)): \(document)")
            case .repeatedKey:
                refusedAsJSON += 1
                #expect(jsonbReads, "JSON refused for a key twice, which jsonb refuses: \(document)")
            case .tooPrecise, .outOfPlace:
                refusedAsJSON += 1
                // jsonb reads it too, unless its digits stand further out than even numeric's places (22003).
                #expect(
                    jsonbReads || refusal == SQLState("22003"),
                    "JSON refused for a number misread, which jsonb refuses as no JSON: \(document)")
            }
        }
        await connection.close()
        // Both answers, often: a mutation keeps a document JSON about as often as it breaks it.
        #expect(
            taken > 200 && refused > 200,
            "\(taken) taken, \(refused) refused, \(refusedAsJSON) with a key twice or a number misread")
    }
}
