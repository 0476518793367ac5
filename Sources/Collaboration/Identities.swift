import Foundation

/// An account at an identity provider, as a verified token describes it. Users are found by `(issuer,
/// subject)`; the subject is whatever the provider makes it (`auth0|64f...`, `user_2abc...`, a UUID).
public struct ExternalIdentity: Sendable, Hashable, Codable {
    /// The token's `iss`; empty for development tokens without one.
    public let issuer: String
    public let subject: String
    /// The address the token gives, as it gives it: signing in keeps it as rbac writes an address (`EmailAddress`),
    /// or keeps none when it is none and tells a new user why.
    public let email: String?
    /// The provider verified `email` (`email_verified`, or an issuer trusted to verify every address).
    public let emailVerified: Bool
    /// The name the token gives, as a typed display name is kept (`validatedName`); nil for one that is none.
    public let name: String?

    public init(
        issuer: String, subject: String, email: String? = nil, emailVerified: Bool = false, name: String? = nil
    ) {
        self.issuer = issuer
        self.subject = subject
        self.email = email
        self.emailVerified = emailVerified
        // Dropped rather than refused, as `sign_in` drops it: the person signing in did not write it and cannot
        // mend it.
        self.name = name.flatMap { try? validatedName($0, "a provider's name") }
    }

    /// Checks an identity an operator typed: a subject of 1 to 255 characters, an issuer of at most 500, neither
    /// with control characters.
    public static func validate(issuer: String, subject: String) throws(CollaborationError) {
        guard issuer.storedLength <= 500, !containsControlCharacter(issuer) else {
            throw CollaborationError(
                .invalidInput, "an identity's issuer must have at most 500 characters, none a control character")
        }
        guard (1...255).contains(subject.storedLength), !containsControlCharacter(subject) else {
            throw CollaborationError(
                .invalidInput, "an identity's subject must have 1 to 255 characters, none a control character")
        }
    }
}

/// A user signed in through an identity: who they are here, and whether this sign-in created them.
public struct SignedIn: Sendable, Hashable {
    public let user: UUID
    public let identity: ExternalIdentity
    public let created: Bool

    public init(user: UUID, identity: ExternalIdentity, created: Bool) {
        self.user = user
        self.identity = identity
        self.created = created
    }
}

/// An identity as listed with its user.
public struct UserIdentity: Sendable, Hashable, Codable {
    public let issuer: String
    public let subject: String

    public init(issuer: String, subject: String) {
        self.issuer = issuer
        self.subject = subject
    }
}
