import Collaboration
import Foundation
import InMemoryRepositories
import Postgres
import Storage
import TestSupport
import Testing

/// The collaboration services' rules, as one list of scenarios run against both repositories: the in-memory
/// one (fast, for domain tests) and the Postgres one (the SQL functions), so the two cannot drift apart.
@Suite("Collaboration services on both repositories")
struct CollaborationScenarioTests {
    /// The services over a fresh repository of the given kind, and a way to make users.
    struct World {
        let repository: any CollaborationRepository
        let permissions: CollaborationPermissionService
        let memberships: MembershipService
        let invitations: CollaborationInvitationService
        let admin = Actor.operator(label: "tests")

        init(_ repository: any CollaborationRepository) {
            self.repository = repository
            permissions = CollaborationPermissionService(repository: repository)
            memberships = MembershipService(repository: repository)
            invitations = CollaborationInvitationService(
                repository: repository, baseURL: URL(string: "https://rbac.test")!)
        }

        func user(_ name: String) async throws -> UUID {
            try await repository.addUser(
                email: EmailAddress(rawValue: "\(name)-\(UUID().uuidString.prefix(8))@example.com")!, displayName: name
            ).id
        }

        /// A couple owned by a new user; returns (couple, owner).
        func couple() async throws -> (UUID, UUID) {
            let owner = try await user("owner")
            return (try await repository.createCouple(name: "Olivia & Paul", owner: owner, as: admin).id, owner)
        }

        func member(_ couple: UUID, _ role: String) async throws -> UUID {
            let id = try await user(role)
            _ = try await memberships.grant(RoleName(rawValue: role)!, to: id, in: couple, as: admin)
            return id
        }
    }

    static func withWorld(_ backend: Backend, _ body: (World) async throws -> Void) async throws {
        switch backend {
        case .memory:
            let roles = try PolicyDocument.load(from: repositoryRoot.appendingPathComponent("policies/policy.json"))
                .flattened()
            try await body(World(InMemoryCollaborationRepository(roles: roles)))
        case .postgres:
            try await TestDatabase.withFreshPool(from: .migrated) { pool in
                try await body(World(PostgresCollaborationRepository(pool: pool)))
            }
        }
    }

    @Test("a planner may edit the budget; a viewer may not invite", arguments: Backend.allCases)
    func rolesGrantPermissions(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, _) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            let viewer = try await world.member(couple, "viewer")
            #expect(
                try await world.permissions.check(
                    Permission(rawValue: "budget.edit")!, user: planner, couple: couple
                ).allowed)
            #expect(
                !(try await world.permissions.check(
                    Permission(rawValue: "collaborators.invite")!, user: viewer, couple: couple
                ).allowed))
            #expect(
                try await world.permissions.role(user: planner, couple: couple, as: world.admin)
                    == RoleName(rawValue: "planner"))
            let viewerPermissions = try await world.permissions.permissions(
                user: viewer, couple: couple, as: .user(viewer))
            #expect(viewerPermissions.allSatisfy { $0.rawValue.hasSuffix(".view") })
        }
    }

    @Test("an unknown permission or role is refused, naming the valid ones", arguments: Backend.allCases)
    func unknownNames(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            await expectRefusal(.invalidInput) {
                _ = try await world.permissions.check(
                    Permission(rawValue: "budget.edt")!, user: owner, couple: couple
                ).allowed
            }
            do {
                _ = try await world.memberships.grant(
                    RoleName(rawValue: "overlord")!, to: owner, in: couple, as: world.admin)
                Issue.record("an unknown role was accepted")
            } catch let error as CollaborationError {
                #expect(error.code == .invalidInput)
                #expect(error.message.contains("owner, partner, planner, viewer"))
            }
        }
    }

    @Test("the sole owner cannot leave, and nothing changes", arguments: Backend.allCases)
    func soleOwnerCannotLeave(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            await expectRefusal(.lastOwner) {
                _ = try await world.memberships.leave(couple, user: nil, as: .user(owner))
            }
            await expectRefusal(.lastOwner) {
                _ = try await world.memberships.grant(
                    RoleName(rawValue: "viewer")!, to: owner, in: couple, as: world.admin)
            }
            #expect(try await world.permissions.role(user: owner, couple: couple, as: world.admin) == .owner)
            #expect(!(try await world.permissions.canLeave(user: owner, couple: couple, as: .user(owner))))
        }
    }

    @Test(
        "escalation is refused: a partner cannot make an owner, a planner cannot invite a partner",
        arguments: Backend.allCases)
    func escalation(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let partner = try await world.member(couple, "partner")
            let planner = try await world.member(couple, "planner")
            await expectRefusal(.roleNotGrantable) {
                _ = try await world.memberships.grant(.owner, to: planner, in: couple, as: .user(partner))
            }
            await expectRefusal(.roleNotGrantable) {
                _ = try await world.memberships.suspend(owner, in: couple, as: .user(partner))
            }
            await expectRefusal(.roleNotGrantable) {
                _ = try await world.invitations.invite(
                    to: couple, role: RoleName(rawValue: "partner")!, as: .user(planner))
            }
            await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.grant(
                    RoleName(rawValue: "viewer")!, to: partner, in: couple, as: .user(planner))
            }
            let outsider = try await world.user("outsider")
            await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.members(of: couple, as: .user(outsider))
            }
        }
    }

    @Test(
        "invite, preview, accept once: the invitee becomes a member with the invited role", arguments: Backend.allCases)
    func invitationFlow(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let issued = try await world.invitations.invite(
                to: couple, role: RoleName(rawValue: "partner")!, as: .user(owner))
            #expect(issued.link.absoluteString == "https://rbac.test/invitations/\(issued.token.rawValue)")
            let preview = try await world.invitations.preview(token: issued.token.rawValue)
            #expect(
                preview.coupleName == "Olivia & Paul" && preview.role.rawValue == "partner"
                    && preview.status == .pending && preview.inviter == "owner")
            let fromOperator = try await world.invitations.invite(
                to: couple, role: RoleName(rawValue: "viewer")!, as: world.admin)
            #expect(
                try await world.invitations.preview(token: fromOperator.token.rawValue).inviter
                    == "The couple's administrator", "an invitee is not shown the operator's label")
            let invitee = try await world.user("invitee")
            let membership = try await world.invitations.accept(
                token: issued.token.rawValue, user: nil, as: .user(invitee))
            #expect(membership.role.rawValue == "partner" && membership.coupleID == couple)
            await expectRefusal(.invitationUsed) {
                _ = try await world.invitations.accept(
                    token: issued.token.rawValue, user: nil, as: .user(try await world.user("late")))
            }
            await expectRefusal(.notFound) { _ = try await world.invitations.preview(token: "inv_not-a-token") }
            let listed = try await world.invitations.invitations(of: couple, as: .user(owner))
            #expect(listed.map(\.status).sorted { $0.rawValue < $1.rawValue } == [.accepted, .pending])
        }
    }

    @Test(
        "members by joining and invitations oldest first come a page at a time, the pages making the whole list",
        arguments: Backend.allCases)
    func paging(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let viewer = RoleName(rawValue: "viewer")!
            var (joined, issued) = ([owner], [UUID]())
            for name in ["ana", "ben", "cat"] {
                joined.append(try await world.user(name))
                _ = try await world.memberships.grant(viewer, to: joined.last!, in: couple, as: .user(owner))
                issued.append(
                    try await world.invitations.invite(to: couple, role: viewer, as: .user(owner)).invitation.id)
            }
            let members = try await world.memberships.members(of: couple, as: .user(owner)).map(\.user.id)
            #expect(members == joined, "in the order they joined, whatever their ids")
            let firstMembers = try await world.memberships.members(of: couple, limit: 2, after: nil, as: .user(owner))
            // The page's last member leaves before the next page is read: their place still holds.
            let gone = try #require(firstMembers.last)
            _ = try await world.memberships.remove(gone.user.id, from: couple, as: .user(owner))
            let restMembers = try await world.memberships.members(
                of: couple, limit: 2, after: gone.cursor, as: .user(owner))
            #expect((firstMembers + restMembers).map(\.user.id) == members)
            await expectRefusal(.notFound) {
                _ = try await world.memberships.members(
                    of: couple, limit: 2, after: PageCursor(id: gone.user.id), as: .user(owner))
            }
            // A user's couples likewise: ben's first couple, then the one he joined next.
            let (later, laterOwner) = try await world.couple()
            _ = try await world.memberships.grant(viewer, to: joined[2], in: later, as: .user(laterOwner))
            let first = try await world.repository.userCouples(joined[2], limit: 1, after: nil, as: world.admin)
            let rest = try await world.repository.userCouples(
                joined[2], limit: 1, after: first.last?.cursor, as: world.admin)
            #expect((first + rest).map(\.coupleID) == [couple, later])
            let invitations = try await world.invitations.invitations(of: couple, as: .user(owner)).map(\.id)
            #expect(invitations == issued, "oldest first, whatever their ids")
            // Pending ones: the page's last is revoked before the next page is read, which still follows it.
            let firstInvitations = try await world.invitations.invitations(
                of: couple, status: .pending, limit: 2, after: nil, as: .user(owner))
            let revoked = try #require(firstInvitations.last)
            try await world.invitations.revoke(revoked.id, in: couple, as: .user(owner))
            for after in [revoked.cursor, PageCursor(id: revoked.id)] {
                let restInvitations = try await world.invitations.invitations(
                    of: couple, status: .pending, limit: 2, after: after, as: .user(owner))
                #expect((firstInvitations + restInvitations).map(\.id) == invitations)
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.memberships.members(of: couple, limit: 0, after: nil, as: .user(owner))
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.invitations.invitations(of: couple, limit: 1001, after: nil, as: .user(owner))
            }
        }
    }

    @Test(
        "revoked and email-bound invitations refuse, resend issues a working link, and a member is not invited",
        arguments: Backend.allCases)
    func revokeBindResend(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let stranger = try await world.user("stranger")
            let viewer = RoleName(rawValue: "viewer")!
            let revoked = try await world.invitations.invite(to: couple, role: viewer, as: .user(owner))
            try await world.invitations.revoke(revoked.invitation.id, in: couple, as: .user(owner))
            await expectRefusal(.invitationRevoked) {
                _ = try await world.invitations.accept(token: revoked.token.rawValue, user: nil, as: .user(stranger))
            }
            let bound = try await world.invitations.invite(
                to: couple, role: viewer, email: EmailAddress(rawValue: "bound@example.com")!, as: .user(owner))
            await expectRefusal(.invitationEmailMismatch) {
                _ = try await world.invitations.accept(token: bound.token.rawValue, user: nil, as: .user(stranger))
            }
            let resent = try await world.invitations.resend(bound.invitation.id, in: couple, as: .user(owner))
            #expect(resent.token != bound.token)
            #expect(resent.invitation.email == "bound@example.com")
            let boundUser = try await world.repository.addUser(
                email: EmailAddress(rawValue: "Bound@Example.com")!, displayName: nil)
            await expectRefusal(.invitationRevoked) {
                _ = try await world.invitations.accept(token: bound.token.rawValue, user: nil, as: .user(boundUser.id))
            }
            _ = try await world.invitations.accept(token: resent.token.rawValue, user: nil, as: .user(boundUser.id))
            #expect(try await world.permissions.role(user: boundUser.id, couple: couple, as: world.admin) == viewer)
            // A member's address, whatever its case, is not invited again: the link could only fail them.
            let pending = try await world.invitations.invitations(of: couple, as: .user(owner)).count
            await expectRefusal(.alreadyExists) {
                _ = try await world.invitations.invite(
                    to: couple, role: viewer, email: EmailAddress(rawValue: "BOUND@example.com")!, as: .user(owner))
            }
            #expect(try await world.invitations.invitations(of: couple, as: .user(owner)).count == pending)
        }
    }

    @Test(
        "joining (invitation, grant) or a member's new address revokes pending invitations to them; only those",
        arguments: Backend.allCases)
    func joiningRevokesInvitations(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let (elsewhere, otherOwner) = try await world.couple()
            let viewer = RoleName(rawValue: "viewer")!
            func invite(_ address: String?, to couple: UUID = couple, as actor: UUID = owner) async throws
                -> IssuedInvitation
            {
                try await world.invitations.invite(
                    to: couple, role: viewer, email: address.map { EmailAddress(rawValue: $0)! }, as: .user(actor))
            }
            func statuses(_ invitations: [IssuedInvitation], in couple: UUID = couple, as actor: UUID = owner)
                async throws -> [InvitationStatus]
            {
                let listed = try await world.invitations.invitations(of: couple, as: .user(actor))
                return invitations.map { issued in listed.first { $0.id == issued.invitation.id }!.status }
            }
            let (joiner, granted) = (try await world.user("joiner"), try await world.user("granted"))
            let joinerAddress = try await world.repository.user(.id(joiner)).email
            let grantedAddress = try await world.repository.user(.id(granted)).email
            let accepted = try await invite(joinerAddress)
            let mine = [try await invite(joinerAddress.uppercased()), try await invite(grantedAddress)]
            let others = [try await invite(nil), try await invite("someone.else@example.com")]
            let theirs = try await invite(joinerAddress, to: elsewhere, as: otherOwner)

            _ = try await world.invitations.accept(token: accepted.token.rawValue, user: nil, as: .user(joiner))
            let afterAccepting = try await statuses([accepted] + mine + others)
            #expect(afterAccepting == [.accepted, .revoked, .pending, .pending, .pending])
            await expectRefusal(.invitationRevoked) {
                _ = try await world.invitations.accept(token: mine[0].token.rawValue, user: nil, as: .user(joiner))
            }
            #expect(try await statuses([theirs], in: elsewhere, as: otherOwner) == [.pending], "another couple's")

            _ = try await world.repository.grant(
                couple: couple, user: granted, role: viewer, expiresAt: nil, as: .user(owner))
            #expect(try await statuses(mine + others) == [.revoked, .revoked, .pending, .pending])

            // A member's address changes to one an invitation of their couple names: it could only fail them.
            let newAddress = "moved.\(UUID().uuidString.prefix(8))@example.com"
            let toNewAddress = try await invite(newAddress)
            let elsewhereToNew = try await invite(newAddress, to: elsewhere, as: otherOwner)
            _ = try await world.memberships.editUser(
                joiner, UserEdit(email: EmailAddress(rawValue: newAddress.uppercased())!), as: world.admin)
            #expect(try await statuses([toNewAddress] + others) == [.revoked, .pending, .pending])
            #expect(try await statuses([elsewhereToNew], in: elsewhere, as: otherOwner) == [.pending])
        }
    }

    @Test(
        "the audit log's newest entries, still oldest first, before an entry of its own; a count below 1 is refused",
        arguments: Backend.allCases)
    func auditTail(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, _) = try await world.couple()
            for role in ["planner", "viewer", "partner"] { _ = try await world.member(couple, role) }
            let all = try await world.repository.audit(
                couple: couple, since: nil, before: nil, last: nil, as: world.admin)
            #expect(all.count >= 4 && all.map(\.id) == all.map(\.id).sorted(), "\(all.map(\.action))")
            for last in [1, 2, all.count, all.count + 5] {
                let newest = try await world.repository.audit(
                    couple: couple, since: nil, before: nil, last: last, as: world.admin)
                #expect(newest == Array(all.suffix(last)), "last \(last)")
            }
            let since = all[1].at
            #expect(
                try await world.repository.audit(couple: couple, since: since, before: nil, last: 100, as: world.admin)
                    == all.filter { $0.at >= since })
            // Before an entry: the ones older than it, still the newest `last` of those.
            for cursor in [1, 2, all.count - 1] {
                let older = try await world.repository.audit(
                    couple: couple, since: nil, before: all[cursor].id, last: 2, as: world.admin)
                #expect(older == Array(all[..<cursor].suffix(2)), "before \(cursor)")
            }
            await expectRefusal(.notFound) {
                _ = try await world.repository.audit(
                    couple: couple, since: nil, before: all.map(\.id).max()! + 1, last: nil, as: world.admin)
            }
            let (other, _) = try await world.couple()
            let foreign = try await world.repository.audit(
                couple: other, since: nil, before: nil, last: 1, as: world.admin)
            await expectRefusal(.notFound) {  // an entry of another couple's log
                _ = try await world.repository.audit(
                    couple: couple, since: nil, before: foreign[0].id, last: nil, as: world.admin)
            }
            for last in [0, -1] {
                await expectRefusal(.invalidInput) {
                    _ = try await world.repository.audit(
                        couple: couple, since: nil, before: nil, last: last, as: world.admin)
                }
            }
        }
    }

    @Test("a resend the actor may not make changes nothing: the old link still works", arguments: Backend.allCases)
    func refusedResend(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            let issued = try await world.invitations.invite(
                to: couple, role: RoleName(rawValue: "partner")!, as: .user(owner))
            let before = try await world.repository.audit(
                couple: couple, since: nil, before: nil, last: nil, as: world.admin)
            await expectRefusal(.roleNotGrantable) {
                _ = try await world.invitations.resend(issued.invitation.id, in: couple, as: .user(planner))
            }
            await expectRefusal(.notFound) {
                _ = try await world.invitations.resend(UUID(), in: couple, as: .user(owner))
            }
            let listed = try await world.invitations.invitations(of: couple, as: .user(owner))
            #expect(listed.map(\.id) == [issued.invitation.id] && listed.map(\.status) == [.pending])
            #expect(
                try await world.repository.audit(couple: couple, since: nil, before: nil, last: nil, as: world.admin)
                    == before)
            let invitee = try await world.user("invitee")
            let membership = try await world.invitations.accept(
                token: issued.token.rawValue, user: nil, as: .user(invitee))
            #expect(membership.role.rawValue == "partner")
        }
    }

    @Test(
        "an invitation holds on its inviter's authority: not while they are suspended, and revoked when they go",
        arguments: Backend.allCases)
    func inviterAuthority(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            let viewer = RoleName(rawValue: "viewer")!
            let (first, second) = (
                try await world.invitations.invite(to: couple, role: viewer, as: .user(planner)),
                try await world.invitations.invite(to: couple, role: viewer, as: .user(planner))
            )
            let own = try await world.invitations.invite(to: couple, role: viewer, as: .user(owner))
            let invitee = try await world.user("invitee")
            _ = try await world.memberships.suspend(planner, in: couple, as: world.admin)
            // The page shows it unusable before the invitee signs in, as accepting would answer.
            #expect(try await world.invitations.preview(token: first.token.rawValue).status == .revoked)
            #expect(try await world.invitations.preview(token: own.token.rawValue).status == .pending)
            await expectRefusal(.invitationRevoked) {
                _ = try await world.invitations.accept(token: first.token.rawValue, user: nil, as: .user(invitee))
            }
            // The couple's listing says what the row holds: it may hold again.
            let held = try await world.invitations.invitations(of: couple, as: .user(owner))
            #expect(held.first { $0.id == first.invitation.id }?.status == .pending)
            _ = try await world.memberships.reactivate(planner, in: couple, as: world.admin)
            #expect(try await world.invitations.preview(token: first.token.rawValue).status == .pending)
            _ = try await world.invitations.accept(token: first.token.rawValue, user: nil, as: .user(invitee))
            _ = try await world.memberships.remove(planner, from: couple, as: .user(owner))
            let listed = try await world.invitations.invitations(of: couple, as: .user(owner))
            #expect(
                Dictionary(uniqueKeysWithValues: listed.map { ($0.id, $0.status) })
                    == [first.invitation.id: .accepted, second.invitation.id: .revoked, own.invitation.id: .pending])
            let other = try await world.user("other")
            await expectRefusal(.invitationRevoked) {
                _ = try await world.invitations.accept(token: second.token.rawValue, user: nil, as: .user(other))
            }
        }
    }

    @Test("more than 1,000 invitations: each is read back, resent and listed", arguments: Backend.allCases)
    func manyInvitations(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let viewer = RoleName(rawValue: "viewer")!
            // More than a couple may make in an hour by default.
            switch world.repository {
            case let repository as PostgresCollaborationRepository: _ = try await repository.invitationLimit(set: 2_000)
            case let repository as InMemoryCollaborationRepository: _ = try await repository.invitationLimit(set: 2_000)
            default: Issue.record("a repository of another kind")
            }
            var issued: [UUID] = []
            for _ in 0..<1_001 {
                issued.append(
                    try await world.invitations.invite(to: couple, role: viewer, as: .user(owner)).invitation.id)
            }
            let resent = try await world.invitations.resend(issued.max()!, in: couple, as: .user(owner))
            let listed = try await world.invitations.invitations(of: couple, as: .user(owner))
            #expect(listed.count == 1_002)
            let missing = Set(issued + [resent.invitation.id]).subtracting(listed.map(\.id))
            #expect(missing.isEmpty, "\(missing.count) invitations were not listed")
            #expect(listed.filter { $0.status == .pending }.count == 1_001)
        }
    }

    @Test(
        "a member leaves, and a person accepts, only for themself; the operator names whom, and must",
        arguments: Backend.allCases)
    func actingForOneself(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let partner = try await world.member(couple, "partner")
            let issued = try await world.invitations.invite(
                to: couple, role: RoleName(rawValue: "viewer")!, as: .user(owner))
            let invitee = try await world.user("invitee")
            let leavingForAnother = await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.leave(couple, user: partner, as: .user(owner))
            }
            let acceptingForAnother = await expectRefusal(.permissionDenied) {
                _ = try await world.invitations.accept(token: issued.token.rawValue, user: invitee, as: .user(partner))
            }
            #expect(leavingForAnother?.message.contains("members can leave only for themselves") == true)
            #expect(acceptingForAnother?.message.contains("users accept invitations only for themselves") == true)
            await expectRefusal(.invalidInput) {
                _ = try await world.memberships.leave(couple, user: nil, as: world.admin)
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.invitations.accept(token: issued.token.rawValue, user: nil, as: world.admin)
            }
            let joined = try await world.invitations.accept(
                token: issued.token.rawValue, user: invitee, as: world.admin)
            #expect(joined.userID == invitee && joined.role.rawValue == "viewer", "a refusal used the invitation")
            #expect(try await world.memberships.leave(couple, user: partner, as: world.admin).userID == partner)
            #expect(try await world.permissions.role(user: owner, couple: couple, as: world.admin) == .owner)
        }
    }

    @Test("ownership moves to a member, and the old owner becomes a partner", arguments: Backend.allCases)
    func transferOwnership(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let partner = try await world.member(couple, "partner")
            await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.transferOwnership(of: couple, to: partner, as: .user(partner))
            }
            _ = try await world.memberships.transferOwnership(of: couple, to: partner, as: .user(owner))
            #expect(try await world.permissions.role(user: partner, couple: couple, as: world.admin) == .owner)
            #expect(
                try await world.permissions.role(user: owner, couple: couple, as: world.admin)
                    == RoleName(rawValue: "partner"))
            _ = try await world.memberships.leave(couple, user: nil, as: .user(owner))
            await expectRefusal(.lastOwner) {
                _ = try await world.memberships.leave(couple, user: nil, as: .user(partner))
            }
        }
    }

    @Test(
        "a couple defines at most CoupleRole.mostPerCouple roles; deleting one makes room again",
        arguments: Backend.allCases)
    func coupleRoleLimit(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            // Role names are letters and underscores: r_aa, r_ab, ...
            func role(_ n: Int) -> RoleName {
                let letter = { (i: Int) in String(UnicodeScalar(UInt8(ascii: "a") + UInt8(i))) }
                return RoleName(rawValue: "r_" + letter(n / 26) + letter(n % 26))!
            }
            func create(_ n: Int) async throws {
                _ = try await world.permissions.createRole(
                    role(n), in: couple, description: "Helper \(n)", permissions: [], as: .user(owner))
            }
            for n in 0..<CoupleRole.mostPerCouple { try await create(n) }
            let refusal = await expectRefusal(.quotaExceeded) { try await create(CoupleRole.mostPerCouple) }
            #expect(
                refusal?.message.contains("defines \(CoupleRole.mostPerCouple) roles, the most a couple may") == true,
                "\(String(describing: refusal))")
            func defined() async throws -> Int {
                try await world.permissions.roles(of: couple, as: world.admin).filter(\.coupleDefined).count
            }
            #expect(try await defined() == CoupleRole.mostPerCouple, "the refused role was not made")
            try await world.permissions.deleteRole(role(0), in: couple, reassign: nil, as: .user(owner))
            try await create(CoupleRole.mostPerCouple)
            #expect(try await defined() == CoupleRole.mostPerCouple)
        }
    }

    @Test(
        "a user creates couples only while owning fewer than Couple.ownedPerUserByDefault; the operator is not held",
        arguments: Backend.allCases)
    func coupleLimit(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let user = try await world.user("planner")
            func create(as actor: Actor) async throws -> UUID {
                try await world.repository.createCouple(name: "Wedding", owner: user, as: actor).id
            }
            func owned() async throws -> Int {
                let couples = try await world.repository.userCouples(user, limit: 100, after: nil, as: world.admin)
                return couples.filter { $0.role == .owner }.count
            }
            var couples: [UUID] = []
            for _ in 0..<Couple.ownedPerUserByDefault { couples.append(try await create(as: .user(user))) }
            let refusal = await expectRefusal(.quotaExceeded) { _ = try await create(as: .user(user)) }
            let limit = Couple.ownedPerUserByDefault
            #expect(
                refusal?.message
                    == "user \(user.uuidString.lowercased()) owns \(limit) couples, and a user creates couples only "
                    + "while owning fewer than \(limit); delete one no longer needed, or ask the operator to raise "
                    + "the limit (rbac couples limit)")
            #expect(try await owned() == Couple.ownedPerUserByDefault, "the refused couple was not made")
            couples.append(try await create(as: world.admin))
            await expectRefusal(.quotaExceeded) { _ = try await create(as: .user(user)) }
            for couple in couples.prefix(2) { try await world.repository.deleteCouple(couple, as: .user(user)) }
            _ = try await create(as: .user(user))
            #expect(try await owned() == Couple.ownedPerUserByDefault)
        }
    }

    @Test(
        "a couple makes Invitation.perCouplePerHourByDefault invitations an hour; the next is refused until when",
        arguments: Backend.allCases)
    func invitationLimit(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let viewer = RoleName(rawValue: "viewer")!
            let limit = Invitation.perCouplePerHourByDefault
            for _ in 0..<limit { _ = try await world.invitations.invite(to: couple, role: viewer, as: .user(owner)) }
            let made = try await world.invitations.invitations(of: couple, as: .user(owner))
            #expect(made.count == limit)
            // The next may be made when the oldest of the hour leaves it, on a whole second.
            let oldest = try #require(made.map(\.createdAt).min())
            let next = Date(timeIntervalSince1970: (oldest.timeIntervalSince1970 + 3600).rounded(.up))
            let refusal = await expectRefusal(.rateLimited) {
                _ = try await world.invitations.invite(to: couple, role: viewer, as: .user(owner))
            }
            #expect(refusal?.retryAt == next)
            let shown = next.formatted(
                .iso8601.year().month().day().time(includingFractionalSeconds: false).dateTimeSeparator(.space))
            #expect(
                refusal?.message
                    == "couple \(couple.uuidString.lowercased()) has made \(limit) invitations in the last hour, the "
                    + "most allowed; the next may be made at \(shown) UTC; the operator sets the limit: rbac "
                    + "invitations limit --per-hour N")
            #expect(try await world.invitations.invitations(of: couple, as: .user(owner)).count == limit)
            // Another couple's hour is its own.
            let (other, otherOwner) = try await world.couple()
            _ = try await world.invitations.invite(to: other, role: viewer, as: .user(otherOwner))
        }
    }

    @Test("suspending and removing take permissions away at once", arguments: Backend.allCases)
    func suspendAndRemove(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            let edit = Permission(rawValue: "budget.edit")!
            _ = try await world.memberships.suspend(planner, in: couple, as: .user(owner))
            #expect(!(try await world.permissions.check(edit, user: planner, couple: couple).allowed))
            let active = try await world.memberships.reactivate(planner, in: couple, as: .user(owner))
            #expect(try await world.permissions.check(edit, user: planner, couple: couple).allowed)
            // Changing nothing writes nothing: the revision stays where the change before left it.
            let again = try await world.memberships.reactivate(planner, in: couple, as: .user(owner))
            let granted = try await world.memberships.grant(
                RoleName(rawValue: "planner")!, to: planner, in: couple, as: .user(owner))
            #expect([again.revision, granted.revision] == [active.revision, active.revision])
            _ = try await world.memberships.remove(planner, from: couple, as: .user(owner))
            #expect(!(try await world.permissions.check(edit, user: planner, couple: couple).allowed))
            await expectRefusal(.notFound) {
                _ = try await world.memberships.remove(planner, from: couple, as: .user(owner))
            }
        }
    }

    @Test(
        "the operator changes a user's address and name; a user only their own name", arguments: Backend.allCases)
    func editUser(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            let taken = try await world.repository.user(.id(owner)).email
            let address = EmailAddress(rawValue: "pia.\(UUID().uuidString.prefix(8))@example.com")!
            let renamed = UserEdit(displayName: "Pia Berg")
            await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.editUser(planner, renamed, as: .user(owner))
            }
            await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.editUser(planner, UserEdit(email: address), as: .user(planner))
            }
            await expectRefusal(.alreadyExists) {
                _ = try await world.memberships.editUser(
                    planner, UserEdit(email: EmailAddress(rawValue: taken.uppercased())!), as: world.admin)
            }
            await expectRefusal(.notFound) {
                _ = try await world.memberships.editUser(UUID(), renamed, as: world.admin)
            }
            #expect(try await world.repository.user(.id(planner)).displayName == "planner", "refused: no change")

            let own = try await world.memberships.editUser(planner, renamed, as: .user(planner))
            #expect(own.displayName == "Pia Berg")
            let moved = try await world.memberships.editUser(planner, UserEdit(email: address), as: world.admin)
            #expect((moved.email, moved.displayName) == (address.rawValue, "Pia Berg"), "a field not given stays")
            #expect(try await world.repository.user(.email(address)).id == planner)
            let unnamed = try await world.memberships.editUser(
                planner, UserEdit(displayName: .some(nil)), as: world.admin)
            #expect(unnamed.displayName == nil)
            #expect(
                try await world.permissions.check(Permission(rawValue: "budget.edit")!, user: planner, couple: couple)
                    .allowed,
                "their membership is theirs still")
        }
    }

    @Test(
        "the operator links and unlinks a user's identities; a sign-in through one finds the user while linked",
        arguments: Backend.allCases)
    func linkIdentity(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let account = UserIdentity(issuer: "https://idp.example/", subject: "auth0|\(UUID().uuidString)")
            let (couple, owner) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            let (link, unlink) = (UserEdit(linkIdentity: account), UserEdit(unlinkIdentity: account))
            await expectRefusal(.permissionDenied) {
                _ = try await world.memberships.editUser(planner, link, as: .user(planner))
            }
            await expectRefusal(.notFound) {
                _ = try await world.memberships.editUser(planner, unlink, as: world.admin)
            }
            await expectRefusal(.invalidInput) {
                let blank = UserIdentity(issuer: account.issuer, subject: "")
                _ = try await world.memberships.editUser(planner, UserEdit(linkIdentity: blank), as: world.admin)
            }
            #expect(try await world.repository.user(.id(planner)).identities.isEmpty, "refused: no change")

            #expect(try await world.memberships.editUser(planner, link, as: world.admin).identities == [account])
            #expect(try await world.memberships.editUser(planner, link, as: world.admin).identities == [account])
            let relink = UserEdit(linkIdentity: account, unlinkIdentity: account)
            #expect(try await world.memberships.editUser(planner, relink, as: world.admin).identities == [account])
            await expectRefusal(.alreadyExists) {
                _ = try await world.memberships.editUser(owner, link, as: world.admin)
            }
            let signingIn = ExternalIdentity(issuer: account.issuer, subject: account.subject)
            #expect(try await world.repository.signIn(signingIn).user == planner)

            #expect(try await world.memberships.editUser(planner, unlink, as: world.admin).identities.isEmpty)
            // No user has it now, and it names no address to make one with.
            await expectRefusal(.invalidInput) {
                _ = try await world.repository.signIn(signingIn)
            }
            #expect(try await world.repository.user(.id(owner)).identities.isEmpty)
            // One that joins them by the address its provider verified is theirs as well.
            let verified = ExternalIdentity(
                issuer: account.issuer, subject: "other|\(UUID().uuidString)",
                email: try await world.repository.user(.id(planner)).email, emailVerified: true)
            #expect(try await world.repository.signIn(verified).user == planner)
            #expect(
                try await world.repository.user(.id(planner)).identities == [
                    UserIdentity(issuer: verified.issuer, subject: verified.subject)
                ])
        }
    }

    @Test(
        "a user deletes themself with their memberships, not while a couple's last owner; what they accepted forgets them",
        arguments: Backend.allCases)
    func deleteUser(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let planner = try await world.member(couple, "planner")
            await expectRefusal(.permissionDenied) { try await world.memberships.deleteUser(planner, as: .user(owner)) }
            await expectRefusal(.lastOwner) { try await world.memberships.deleteUser(owner, as: .user(owner)) }
            #expect(try await world.memberships.members(of: couple, as: world.admin).count == 2, "refused: no change")
            try await world.memberships.deleteUser(planner, as: .user(planner))
            let edit = Permission(rawValue: "budget.edit")!
            #expect(!(try await world.permissions.check(edit, user: planner, couple: couple).allowed))
            #expect(try await world.memberships.members(of: couple, as: world.admin).map(\.user.id) == [owner])
            await expectRefusal(.notFound) { _ = try await world.repository.user(.id(planner)) }
            await expectRefusal(.notFound) { try await world.memberships.deleteUser(planner, as: world.admin) }

            // An invitation they accepted stays, without them or the address it was sent to.
            let guest = try await world.repository.addUser(
                email: EmailAddress(rawValue: "guest@example.com")!, displayName: nil)
            let invited = try await world.invitations.invite(
                to: couple, role: RoleName(rawValue: "viewer")!, email: EmailAddress(rawValue: "guest@example.com")!,
                as: .user(owner))
            _ = try await world.invitations.accept(token: invited.token.rawValue, user: nil, as: .user(guest.id))
            func accepted() async throws -> Invitation? {
                try await world.invitations.invitations(of: couple, as: .user(owner))
                    .first { $0.id == invited.invitation.id }
            }
            #expect(try await accepted()?.email == "guest@example.com")
            #expect(try await accepted()?.acceptedBy == guest.id)
            try await world.memberships.deleteUser(guest.id, as: .user(guest.id))
            let erased = try await accepted()
            #expect(erased?.status == .accepted)
            #expect(erased?.email == nil && erased?.acceptedBy == nil)
        }
    }

    @Test(
        "users list by email whatever its case, or those a search finds, couples oldest first, page by page",
        arguments: Backend.allCases)
    func usersAndCouplesInPages(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            for name in ["vera", "Paul", "ana", "Sam", "olivia"] {
                let user = try await world.repository.addUser(
                    email: EmailAddress(rawValue: "\(name)@example.com")!, displayName: nil)
                _ = try await world.repository.createCouple(name: name, owner: user.id, as: world.admin)
            }
            // By id alone, as a client's `after` names a row.
            func walk<Item, Key>(_ read: (Int, PageCursor<Key>?) async throws -> [Item], id: (Item) -> UUID)
                async throws -> [Item]
            {
                var items: [Item] = []
                while true {
                    let page = try await read(2, items.last.map { PageCursor(id: id($0)) })
                    items += page
                    if page.count < 2 { return items }
                }
            }
            let users = try await walk(
                { try await world.repository.users(matching: nil, limit: $0, after: $1) }, id: \.id)
            #expect(users.map(\.email) == ["ana", "olivia", "Paul", "Sam", "vera"].map { "\($0)@example.com" })
            _ = try await world.repository.editUser(users[3].id, UserEdit(displayName: "Sam Alvarez"), as: world.admin)
            let found = try await walk(
                { try await world.repository.users(matching: "A@E", limit: $0, after: $1) }, id: \.id)
            #expect(
                found.map(\.email) == ["ana", "olivia", "vera"].map { "\($0)@example.com" },
                "an address or a name that holds the text, whatever its case, in pages of the same order")
            func emails(_ search: String) async throws -> [String] {
                try await world.repository.users(matching: search, limit: 10, after: nil).map(\.email)
            }
            #expect(try await emails("ALVAREZ") == ["Sam@example.com"])
            // One or two characters are found at the start of an address or a name only.
            #expect(try await emails("A") == ["ana@example.com"], "not Paul, Sam Alvarez or vera")
            #expect(try await emails("v") == ["vera@example.com"], "not olivia or Sam Alvarez")
            #expect(try await emails("Sa") == ["Sam@example.com"])
            // Characters a LIKE pattern would read as wildcards or an escape match only themselves.
            _ = try await world.repository.editUser(users[0].id, UserEdit(displayName: "%_ Ana"), as: world.admin)
            _ = try await world.repository.editUser(users[1].id, UserEdit(displayName: "o_k 100%"), as: world.admin)
            _ = try await world.repository.editUser(users[2].id, UserEdit(displayName: #"\o/ Paul"#), as: world.admin)
            _ = try await world.repository.editUser(users[4].id, UserEdit(displayName: #"ook\"#), as: world.admin)
            let escapes = [("o_k", ["olivia"]), ("o%k", []), (#"ok\"#, ["vera"]), ("%_", ["ana"]), (#"\"#, ["Paul"])]
            for (search, expected) in escapes {
                #expect(try await emails(search) == expected.map { "\($0)@example.com" }, "search \(search)")
            }
            let couples = try await walk(world.repository.couples(limit:after:), id: \.id)
            #expect(couples.map(\.name) == ["vera", "Paul", "ana", "Sam", "olivia"])

            await expectRefusal(.notFound) {
                _ = try await world.repository.users(matching: nil, limit: 2, after: PageCursor(id: UUID()))
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.repository.users(matching: "", limit: 2, after: nil)
            }
            await expectRefusal(.notFound) {
                _ = try await world.repository.couples(limit: 2, after: PageCursor(id: UUID()))
            }
            for limit in [0, 1001] {
                await expectRefusal(.invalidInput) {
                    _ = try await world.repository.users(matching: nil, limit: limit, after: nil)
                }
                await expectRefusal(.invalidInput) { _ = try await world.repository.couples(limit: limit, after: nil) }
            }
        }
    }

    @Test(
        "a walk over every page lists each row once when the last row of a page is deleted or moves before the next",
        arguments: Backend.allCases)
    func walkWhileRowsChange(backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            var users: [User] = []
            for name in ["a", "b", "c", "d", "e", "f", "g"] {
                users.append(
                    try await world.repository.addUser(
                        email: EmailAddress(rawValue: "\(name)@example.com")!, displayName: nil))
                _ = try await world.repository.createCouple(name: name, owner: users[0].id, as: world.admin)
            }
            // Pages of two, as `forEachPage` reads them, each but the last followed by `change` to its last row.
            func walk<Item, Key>(
                _ read: (Int, PageCursor<Key>?) async throws -> [Item], cursor: (Item) -> PageCursor<Key>,
                change: (Item) async throws -> Void
            ) async throws -> [Item] {
                var items: [Item] = []
                while true {
                    let page = try await read(2, items.last.map(cursor))
                    items += page
                    guard page.count == 2 else { return items }
                    try await change(page[1])
                }
            }
            // b is deleted, d moves to the front of the listing, f is deleted.
            let listed = try await walk(
                { try await world.repository.users(matching: nil, limit: $0, after: $1) }, cursor: \.cursor
            ) { user in
                if user.email.hasPrefix("d") {
                    let front = EmailAddress(rawValue: "0@example.com")!
                    _ = try await world.repository.editUser(user.id, UserEdit(email: front), as: world.admin)
                } else {
                    try await world.repository.deleteUser(user.id, as: world.admin)
                }
            }
            #expect(listed == users, "each as it was read")

            let couples = try await walk(world.repository.couples(limit:after:), cursor: \.cursor) {
                try await world.repository.deleteCouple($0.id, as: world.admin)
            }
            #expect(couples.map(\.name) == ["a", "b", "c", "d", "e", "f", "g"])
            // A client's `after` names a row by its id alone: one gone has no place to page after.
            await expectRefusal(.notFound) {
                _ = try await world.repository.couples(limit: 2, after: PageCursor(id: couples[1].id))
            }
            await expectRefusal(.notFound) {
                _ = try await world.repository.users(matching: nil, limit: 2, after: PageCursor(id: users[1].id))
            }
        }
    }
}
