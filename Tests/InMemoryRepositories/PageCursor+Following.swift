import Foundation
import Tenancy

extension PageCursor {
    /// The rows of `ordered`, a listing held in memory in its order, that come after this place, as `follows`
    /// says of a row and a place's key and id: at the key the cursor carries, else at that of the row with its
    /// id; nil when it carries none and no row has that id: the in-memory stand-in for a keyset page.
    func following<Row>(
        in ordered: [Row], id: (Row) -> UUID, key: (Row) -> Key, follows: (Row, Key, UUID) -> Bool
    ) -> [Row]? {
        guard let place = self.key ?? ordered.first(where: { id($0) == self.id }).map(key) else { return nil }
        return ordered.filter { follows($0, place, self.id) }
    }
}
