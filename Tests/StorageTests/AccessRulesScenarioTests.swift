import Collaboration
import Foundation
import Testing

/// Expiring memberships and couples' own roles: the same rules on both repositories.
extension CollaborationScenarioTests {
    @Test(
        "an expiry is kept, listed, removed by granting again; an owner's and a past one are refused",
        arguments: Backend.allCases)
    func expiringMemberships(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let planner = try await world.user("planner")
            let plannerRole = RoleName(rawValue: "planner")!
            let ends = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 86_400).rounded())
            let granted = try await world.memberships.grant(
                plannerRole, to: planner, in: couple, until: ends, as: world.admin)
            #expect(granted.expiresAt == ends)
            let set = try await world.repository.permissionSet(couple: couple, user: planner)
            #expect(set.permissions.contains(Permission(rawValue: "budget.edit")!) && set.expiresAt == ends)
            let listed = try await world.memberships.members(of: couple, as: world.admin)
            #expect(listed.first { $0.user.id == planner }?.expiresAt == ends)
            #expect(listed.first { $0.user.id == planner }?.status == .active)

            await expectRefusal(.invalidInput) {
                _ = try await world.memberships.grant(.owner, to: planner, in: couple, until: ends, as: world.admin)
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.memberships.grant(
                    plannerRole, to: planner, in: couple, until: Date().addingTimeInterval(-60), as: world.admin)
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.invitations.invite(
                    to: couple, role: .owner, membershipExpiresAt: ends, as: .user(owner))
            }
            #expect(
                try await world.repository.permissionSet(couple: couple, user: planner).expiresAt == ends, "unchanged")

            let renewed = try await world.memberships.grant(plannerRole, to: planner, in: couple, as: world.admin)
            #expect(renewed.expiresAt == nil, "granting again without an expiry removes it")
            let transferred = try await world.memberships.transferOwnership(of: couple, to: planner, as: .user(owner))
            #expect(transferred.role == .owner && transferred.expiresAt == nil)
        }
    }

    @Test("an invitation's expiry becomes the membership's", arguments: Backend.allCases)
    func invitedUntil(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let ends = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3_600).rounded())
            let issued = try await world.invitations.invite(
                to: couple, role: RoleName(rawValue: "viewer")!, membershipExpiresAt: ends, as: .user(owner))
            #expect(issued.invitation.membershipExpiresAt == ends)
            #expect(try await world.invitations.preview(token: issued.token.rawValue).membershipExpiresAt == ends)
            let guest = try await world.user("guest")
            let joined = try await world.invitations.accept(token: issued.token.rawValue, user: guest, as: world.admin)
            #expect(joined.expiresAt == ends)
        }
    }

    @Test(
        "a couple's role: no escalation in authoring, giving, inviting or editing; deleting needs --reassign",
        arguments: Backend.allCases)
    func coupleRoles(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { world in
            let (couple, owner) = try await world.couple()
            let partner = try await world.member(couple, "partner")
            let planner = try await world.member(couple, "planner")
            let guest = try await world.user("guest")
            let mom = RoleName(rawValue: "mom")!
            let heir = RoleName(rawValue: "heir")!
            let perms = { (names: [String]) in names.map { Permission(rawValue: $0)! } }

            let created = try await world.permissions.createRole(
                mom, in: couple, description: "  Sees the guests  ",
                permissions: perms(["guests.view", "budget.view"]),
                as: .user(partner))
            #expect(
                created.description == "Sees the guests"
                    && created.permissions == perms(["budget.view", "guests.view"]))
            await expectRefusal(.permissionDenied) {
                _ = try await world.permissions.createRole(
                    RoleName(rawValue: "usher")!, in: couple, description: "x", permissions: [], as: .user(planner))
            }
            await expectRefusal(.roleNotGrantable) {
                _ = try await world.permissions.createRole(
                    heir, in: couple, description: "x", permissions: perms(["couple.delete"]), as: .user(partner))
            }
            // couple.transfer goes with ownership: a role granting it would say "allowed" to a hand-over refused.
            let transfer = await expectRefusal(.invalidInput) {
                _ = try await world.permissions.createRole(
                    heir, in: couple, description: "x", permissions: perms(["couple.transfer"]), as: .user(owner))
            }
            #expect(
                transfer?.message.hasPrefix("couple.transfer goes with ownership: a couple's role cannot grant it")
                    == true, "\(String(describing: transfer))")
            await expectRefusal(.alreadyExists) {
                _ = try await world.permissions.createRole(
                    RoleName(rawValue: "viewer")!, in: couple, description: "x", permissions: [], as: .user(owner))
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.permissions.createRole(
                    RoleName(rawValue: "usher")!, in: couple, description: "two\nlines", permissions: [],
                    as: .user(owner))
            }
            _ = try await world.permissions.createRole(
                heir, in: couple, description: "May delete the couple", permissions: perms(["couple.delete"]),
                as: .user(owner))

            await expectRefusal(.roleNotGrantable) {
                _ = try await world.memberships.grant(heir, to: guest, in: couple, as: .user(partner))
            }
            await expectRefusal(.roleNotGrantable) {
                _ = try await world.invitations.invite(to: couple, role: mom, as: .user(planner))
            }
            _ = try await world.memberships.grant(mom, to: guest, in: couple, as: .user(partner))
            let held = try await world.repository.permissionSet(couple: couple, user: guest)
            #expect(held.permissions == Set(perms(["budget.view", "guests.view"])))

            await expectRefusal(.roleNotGrantable) {
                _ = try await world.permissions.editRole(
                    mom, in: couple, description: nil, permissions: perms(["couple.delete"]), as: .user(partner))
            }
            await expectRefusal(.invalidInput) {
                _ = try await world.permissions.editRole(
                    mom, in: couple, description: nil, permissions: perms(["couple.transfer"]), as: .user(owner))
            }
            let edited = try await world.permissions.editRole(
                mom, in: couple, description: nil, permissions: perms(["guests.edit"]), as: .user(partner))
            #expect(edited.permissions == perms(["guests.edit"]) && edited.description == "Sees the guests")
            #expect(
                try await world.repository.permissionSet(couple: couple, user: guest).permissions
                    == Set(perms(["guests.edit"])), "the holder has the new set at once")

            let invited = try await world.invitations.invite(to: couple, role: mom, as: .user(partner))
            let roles = try await world.permissions.roles(of: couple, as: .user(planner))
            #expect(roles.filter(\.coupleDefined).map(\.name) == [heir, mom])
            await expectRefusal(.roleInUse) {
                try await world.permissions.deleteRole(mom, in: couple, reassign: nil, as: .user(partner))
            }
            // Both repositories say the same.
            for (target, says) in [
                (mom, "members of mom cannot move to the role being deleted; name another role to move them to"),
                (.owner, "members of mom cannot move to owner; ownership moves with transfer_ownership"),
            ] {
                let refused = await expectRefusal(.invalidInput) {
                    try await world.permissions.deleteRole(mom, in: couple, reassign: target, as: .user(partner))
                }
                #expect(refused?.message == says)
            }
            try await world.permissions.deleteRole(
                mom, in: couple, reassign: RoleName(rawValue: "viewer")!, as: .user(partner))
            #expect(try await world.repository.role(couple: couple, user: guest, as: world.admin)?.rawValue == "viewer")
            let pending = try await world.repository.invitations(
                couple: couple, status: .pending, limit: 10, after: nil, as: world.admin)
            #expect(
                pending.first { $0.id == invited.invitation.id }?.role.rawValue == "viewer",
                "the pending invitation moved with the members")
            await expectRefusal(.notFound) {
                try await world.permissions.deleteRole(mom, in: couple, reassign: nil, as: .user(owner))
            }
        }
    }
}
