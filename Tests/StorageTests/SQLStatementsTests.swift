import Testing

@testable import Storage

@Suite("Splitting SQL files into statements")
struct SQLStatementsTests {
    @Test("semicolons inside strings, identifiers, dollar quotes and comments do not end a statement")
    func quotedSemicolons() {
        let sql = """
            -- a comment; with a semicolon
            CREATE TABLE "odd;name" (note text DEFAULT 'a;b' || 'it''s;');
            /* block; /* nested; */ still a comment; */
            DO $$ BEGIN PERFORM 1; END $$;
            CREATE FUNCTION f() RETURNS text LANGUAGE sql AS $body$ SELECT 'x;$$;' $body$;
            SELECT E'back\\\\slash\\';quote', $1::text;
            SELECT 2
            """
        #expect(
            SQLStatements.split(sql).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } == [
                "-- a comment; with a semicolon\nCREATE TABLE \"odd;name\" (note text DEFAULT 'a;b' || 'it''s;')",
                "/* block; /* nested; */ still a comment; */\nDO $$ BEGIN PERFORM 1; END $$",
                "CREATE FUNCTION f() RETURNS text LANGUAGE sql AS $body$ SELECT 'x;$$;' $body$",
                "SELECT E'back\\\\slash\\';quote', $1::text",
                "SELECT 2",
            ])
    }

    @Test("statements of only whitespace and comments are left out")
    func emptyStatements() {
        #expect(SQLStatements.split("  ;\n-- nothing;\n;/* none */;  ").isEmpty)
        #expect(SQLStatements.split("SELECT 1;;  -- done") == ["SELECT 1"])
    }

    @Test("every file of sql/ splits into statements that rejoin to the file")
    func projectFiles() throws {
        let runner = try MigrationRunner.load(from: try ProjectFiles.directory("sql"))
        for sql in runner.migrations.map(\.sql) + runner.definitions.map(\.sql) + [runner.distribution ?? ""] {
            let statements = SQLStatements.split(sql)
            #expect(!statements.isEmpty || sql.isEmpty)
            // Nothing lost: the statements and the semicolons between them are the file, less comment-only
            // tails.
            #expect(sql.hasPrefix(statements.joined(separator: ";")))
        }
    }
}
