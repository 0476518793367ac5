/// Splits a SQL file into its statements, at the semicolons that end them: not those inside string constants
/// (`'...'`, `E'...'`), quoted identifiers, dollar quotes (`$$...$$`, `$body$...$body$`) or comments. The
/// migration runner sends statements one at a time: once tables are distributed, Citus refuses DDL sent as
/// several statements in one query string.
enum SQLStatements {
    /// The statements of `sql` in order, each without its semicolon; statements of only whitespace and
    /// comments are left out.
    static func split(_ sql: String) -> [String] {
        let text = Array(sql.unicodeScalars)
        var statements: [String] = []
        var start = 0
        var index = 0
        var hasCode = false  // whether the current statement holds anything but whitespace and comments

        func isIdentifierCharacter(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "_" || scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
        }
        func starts(with prefix: [Unicode.Scalar], at position: Int) -> Bool {
            position + prefix.count <= text.count && Array(text[position..<position + prefix.count]) == prefix
        }
        /// The dollar-quote tag (`$tag$`, `$$`) opening at `position`, or nil (`$1` is a parameter).
        func dollarTag(at position: Int) -> [Unicode.Scalar]? {
            guard text[position] == "$", position == 0 || !isIdentifierCharacter(text[position - 1]) else { return nil }
            var end = position + 1
            while end < text.count, text[end] != "$" {
                guard isIdentifierCharacter(text[end]), !(end == position + 1 && ("0"..."9").contains(text[end]))
                else { return nil }
                end += 1
            }
            return end < text.count ? Array(text[position...end]) : nil
        }

        while index < text.count {
            let scalar = text[index]
            if scalar == "-", starts(with: ["-", "-"], at: index) {
                while index < text.count, text[index] != "\n" { index += 1 }
                continue
            }
            if scalar == "/", starts(with: ["/", "*"], at: index) {
                var depth = 0
                repeat {
                    if starts(with: ["/", "*"], at: index) {
                        depth += 1
                        index += 2
                    } else if starts(with: ["*", "/"], at: index) {
                        depth -= 1
                        index += 2
                    } else {
                        index += 1
                    }
                } while depth > 0 && index < text.count
                continue
            }
            if scalar == ";" {
                if hasCode { statements.append(String(String.UnicodeScalarView(text[start..<index]))) }
                index += 1
                start = index
                hasCode = false
                continue
            }
            if !scalar.properties.isWhitespace { hasCode = true }
            if scalar == "'" {
                // An escape string (E'...') also escapes with backslashes.
                let escapes =
                    index > 0 && (text[index - 1] == "E" || text[index - 1] == "e")
                    && (index == 1 || !isIdentifierCharacter(text[index - 2]))
                index += 1
                while index < text.count {
                    if escapes && text[index] == "\\" {
                        index += 2
                    } else if text[index] == "'" {
                        if starts(with: ["'", "'"], at: index) {
                            index += 2
                        } else {
                            break
                        }
                    } else {
                        index += 1
                    }
                }
                index += 1
            } else if scalar == "\"" {
                index += 1
                while index < text.count, text[index] != "\"" || starts(with: ["\"", "\""], at: index) {
                    index += text[index] == "\"" ? 2 : 1
                }
                index += 1
            } else if let tag = dollarTag(at: index) {
                index += tag.count
                while index < text.count, !starts(with: tag, at: index) { index += 1 }
                index += tag.count
            } else {
                index += 1
            }
        }
        if hasCode { statements.append(String(String.UnicodeScalarView(text[start..<min(index, text.count)]))) }
        return statements
    }
}
