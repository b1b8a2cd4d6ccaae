"""The pure decision (app/rules/privileges.py): inheritance, WRITE includes READ, deny by default,
what a caller sees, and 403 versus 404."""

from __future__ import annotations

import pytest

from app.rules.privileges import (
    ALLOW,
    FORBIDDEN,
    HIDDEN,
    EffectiveGrants,
    Grant,
    Kind,
    Privilege,
    Securable,
    decide,
)

R, W, C, D = Privilege.READ, Privilege.WRITE, Privilege.CREATE, Privilege.DROP


def ns(*levels: str) -> Securable:
    return Securable.of_namespace("wh", levels)


def table(*path: str) -> Securable:
    *levels, name = path
    return Securable.of_entry(Kind.TABLE, "wh", tuple(levels), name)


def held(*grants: tuple[Privilege, Securable]) -> EffectiveGrants:
    return EffectiveGrants.build(Grant(p, s) for p, s in grants)


@pytest.mark.parametrize(
    ("granted_on", "target", "expected"),
    [
        (Securable.catalog(), table("a", "b", "t"), True),
        (Securable.of_warehouse("wh"), table("a", "b", "t"), True),
        (Securable.of_warehouse("other"), table("a", "b", "t"), False),
        (ns("a"), table("a", "b", "t"), True),
        (ns("a", "b"), table("a", "b", "t"), True),
        (ns("a", "b"), table("a", "c", "t"), False),
        (ns("a", "b"), ns("a"), False),  # grants inherit down, never up
        (table("a", "t"), table("a", "t"), True),
        (table("a", "t"), table("a", "t2"), False),
        (ns("ab"), table("a", "t"), False),  # levels, not string prefixes
    ],
)
def test_grants_inherit_down_the_tree(granted_on, target, expected):
    assert held((R, granted_on)).holds(R, target) is expected


def test_write_includes_read_and_nothing_else_is_implied():
    grants = held((W, ns("a")))
    assert grants.holds(R, table("a", "t")) and grants.holds(W, table("a", "t"))
    assert not grants.holds(C, ns("a")) and not grants.holds(D, table("a", "t"))
    assert not held((R, ns("a"))).holds(W, table("a", "t"))


def test_deny_by_default_and_admin_holds_everything():
    assert not EffectiveGrants().holds(R, table("a", "t"))
    assert EffectiveGrants(admin=True).holds(Privilege.MANAGE_GRANTS, Securable.catalog())


def test_a_caller_sees_the_way_down_to_its_grants():
    grants = held((R, table("a", "b", "t")))
    assert grants.sees(Securable.of_warehouse("wh")) and grants.sees(ns("a")) and grants.sees(ns("a", "b"))
    assert not grants.sees(ns("a", "c")) and not grants.sees(table("a", "b", "u"))
    assert not grants.holds(R, ns("a"))  # seeing is not reading


def test_forbidden_when_the_container_is_visible_hidden_otherwise():
    grants = held((R, ns("a")))
    assert decide(grants, R, table("a", "t")) == ALLOW
    assert decide(grants, W, table("a", "t")) == FORBIDDEN
    assert decide(grants, R, table("z", "t")) == HIDDEN
    assert decide(grants, None, ns("z")) == FORBIDDEN  # a top-level namespace: the warehouse is visible
    assert decide(grants, None, ns("z", "y")) == HIDDEN
    assert decide(EffectiveGrants(), None, Securable.of_warehouse("wh")) == FORBIDDEN


def test_a_function_holds_what_its_namespace_holds():
    function = Securable.of_entry(Kind.FUNCTION, "wh", ("a",), "f")
    assert held((R, ns("a"))).holds(R, function)
    assert not held((R, table("a", "f"))).holds(R, function)


def test_delegation_gives_only_what_one_holds_and_roles_only_whole():
    """manage-grants delegates the privileges held on the securable and below; a role is managed
    only by who could give every grant it holds (app/management/rights.py reads these)."""
    owner = held((Privilege.MANAGE_GRANTS, ns("a")), (R, ns("a")))
    assert owner.manages_grants() and not EffectiveGrants().manages_grants()
    assert owner.may_grant(R, ns("a")) and owner.may_grant(R, table("a", "t"))
    assert owner.may_grant(Privilege.MANAGE_GRANTS, ns("a", "b"))
    assert not owner.may_grant(W, ns("a"))  # not held
    assert not owner.may_grant(R, ns("z")) and not owner.may_grant(R, Securable.of_warehouse("wh"))
    assert owner.manages_role([Grant(R, table("a", "t"))]) and owner.manages_role([])
    assert not owner.manages_role([Grant(R, table("a", "t")), Grant(R, ns("z"))])
    assert not held((R, ns("a"))).manages_role([])  # no manage-grants anywhere: no role at all


def test_held_within_a_node_is_on_it_above_it_or_below_it():
    """What a management row checks before the stored unit or the body says where exactly (an
    undrop, a mark, a policy: app/management/operations.py): the privilege anywhere in the node."""
    undrop = Privilege.UNDROP
    below = held((undrop, table("a", "t")))
    assert below.holds_within(undrop, Securable.of_warehouse("wh"))
    assert below.holds_within(undrop, ns("a")) and below.holds_within(undrop, Securable.catalog())
    assert not below.holds_within(undrop, ns("b")) and not below.holds_within(undrop, Securable.of_warehouse("x"))
    assert not below.holds_within(R, Securable.of_warehouse("wh"))  # another privilege
    assert held((undrop, Securable.catalog())).holds_within(undrop, ns("z"))  # above
    assert not EffectiveGrants().holds_within(undrop, Securable.catalog())
    assert EffectiveGrants(admin=True).holds_within(undrop, ns("z"))


def test_the_management_yaml_lists_exactly_the_privileges():
    """One privilege list: the management API's enum is ``Privilege``, nothing more (no "admin")."""
    from pathlib import Path

    import yaml

    spec = yaml.safe_load((Path(__file__).parents[2] / "openapi" / "management.yaml").read_text())
    assert spec["components"]["schemas"]["Privilege"]["enum"] == [p.value for p in Privilege]


def test_the_database_accepts_exactly_the_privileges():
    """The newest CHECK on role_grant's privilege (0015's, widened by 0017 with undrop and 0019 with
    manage-maintenance) names exactly ``Privilege``'s values."""
    import re
    from pathlib import Path

    migrations = sorted((Path(__file__).parents[2] / "storage" / "migrations").glob("*.sql"))
    checks = [path for path in migrations if "ADD CONSTRAINT role_grant_privilege CHECK" in path.read_text()]
    assert [path.name for path in checks] == [
        "0015_management_rights.sql",
        "0017_recycle_bin.sql",
        "0019_maintenance.sql",
    ]
    newest = checks[-1].read_text()
    listed = re.findall(r"CHECK \(\s*privilege IN\s*\(([^)]*)\)", newest)
    assert len(listed) == 1
    assert re.findall(r"'([a-z-]+)'", listed[0]) == [p.value for p in Privilege]
