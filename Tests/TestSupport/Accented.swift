/// `scalars` Unicode scalars that make about half as many characters: each "e" followed by a combining acute
/// accent, which Swift counts as one character with it and PostgreSQL's `length()` as two. For testing that a
/// limit is checked as the tables check it.
public func accented(_ scalars: Int) -> String {
    String(repeating: "e\u{301}", count: scalars / 2) + (scalars.isMultiple(of: 2) ? "" : "e")
}
