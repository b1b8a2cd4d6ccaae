"""Least privilege in the management API (issue 33; app/management/rights.py).

A matrix of every management operation x {administrator, holder of manage-grants on the catalog,
plain principal} with the expected answer, and nothing changed when refused; then the rules one
by one: delegation of what one holds, roles one could give, create-principal, self-rotation,
memberships that die with their principal and never reach an IdP user of the same name, and
"admin" as a flag rather than a privilege.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from app.composition.services import services_of
from app.ground.callers import IDP, Principal, current_principal
from tests.api.authz_support import MANAGEMENT as M
from tests.api.authz_support import WAREHOUSE, Caller, Principals, securable_body
from tests.conftest import fetch_token, truncate_catalog

CATALOG = {"type": "catalog"}


def _name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


@dataclass
class World:
    """What one cell of the matrix acts on, made fresh by the administrator."""

    victim: str  # a plain principal
    admin_role: str  # holds read on the catalog
    empty_role: str  # holds nothing
    warehouse: str  # made through the management API


def _world(principals: Principals) -> World:
    admin = principals.admin
    victim = _name("victim")
    assert admin.post(f"{M}/principals", json={"name": victim}).status_code == 201
    admin_role = principals.create_role(_name("strong"))
    principals.grant_role(admin_role, "read", "catalog")
    empty_role = principals.create_role(_name("empty"))
    warehouse = _name("wh")
    made = admin.post(f"{M}/warehouses", json={"name": warehouse, "location": f"s3://{warehouse}/"})
    assert made.status_code == 201, made.text
    return World(victim, admin_role, empty_role, warehouse)


Request = tuple[str, str, dict[str, Any] | None]
# (operation, request given the world and the caller's own role, answers for admin / manager / plain)
MATRIX: list[tuple[str, Callable[[World, str], Request], tuple[int, int, int]]] = [
    ("list principals", lambda w, r: ("get", "/principals", None), (200, 200, 403)),
    ("get a principal", lambda w, r: ("get", f"/principals/{w.victim}", None), (200, 200, 403)),
    ("create a principal", lambda w, r: ("post", "/principals", {"name": _name("new")}), (201, 403, 403)),
    (
        "create an administrator",
        lambda w, r: ("post", "/principals", {"name": _name("new"), "admin": True}),
        (201, 403, 403),
    ),
    ("rotate another's secret", lambda w, r: ("post", f"/principals/{w.victim}/rotate", None), (200, 403, 403)),
    ("delete a principal", lambda w, r: ("delete", f"/principals/{w.victim}", None), (204, 403, 403)),
    ("create a role", lambda w, r: ("post", "/roles", {"name": _name("role")}), (201, 201, 403)),
    ("list roles", lambda w, r: ("get", "/roles", None), (200, 200, 403)),
    ("get a role", lambda w, r: ("get", f"/roles/{w.admin_role}", None), (200, 200, 403)),
    (
        "join a stronger role",
        lambda w, r: ("put", f"/roles/{w.admin_role}/members/{w.victim}", None),
        (204, 403, 403),
    ),
    ("give an empty role", lambda w, r: ("put", f"/roles/{w.empty_role}/members/{w.victim}", None), (204, 204, 403)),
    ("list a stronger role's members", lambda w, r: ("get", f"/roles/{w.admin_role}/members", None), (200, 403, 403)),
    ("list a stronger role's grants", lambda w, r: ("get", f"/roles/{w.admin_role}/grants", None), (200, 403, 403)),
    ("delete a stronger role", lambda w, r: ("delete", f"/roles/{w.admin_role}", None), (204, 403, 403)),
    (
        "grant what one lacks",
        lambda w, r: ("post", f"/roles/{w.empty_role}/grants", {"privilege": "read", "securable": CATALOG}),
        (201, 403, 403),
    ),
    (
        "grant oneself what one lacks",
        lambda w, r: ("post", f"/roles/{r}/grants", {"privilege": "write", "securable": CATALOG}),
        (201, 403, 403),
    ),
    (
        "delegate what one holds",
        lambda w, r: ("post", f"/roles/{w.empty_role}/grants", {"privilege": "manage-grants", "securable": CATALOG}),
        (201, 201, 403),
    ),
    (
        "revoke what one lacks",
        lambda w, r: ("post", f"/roles/{w.admin_role}/grants/revoke", {"privilege": "read", "securable": CATALOG}),
        (204, 403, 403),
    ),
    ("list grants on the catalog", lambda w, r: ("get", "/grants?type=catalog", None), (200, 200, 403)),
    (
        "create a warehouse",
        lambda w, r: ("post", "/warehouses", {"name": _name("wh"), "location": f"s3://{_name('b')}/"}),
        (201, 403, 403),
    ),
    ("list warehouses", lambda w, r: ("get", "/warehouses", None), (200, 200, 403)),
    ("get a warehouse", lambda w, r: ("get", f"/warehouses/{w.warehouse}", None), (200, 200, 403)),
    (
        "update a warehouse",
        lambda w, r: ("put", f"/warehouses/{w.warehouse}", {"allowed-locations": []}),
        (200, 403, 403),
    ),
    ("delete a warehouse", lambda w, r: ("delete", f"/warehouses/{w.warehouse}", None), (204, 403, 403)),
]


def _state(db: psycopg.Connection) -> dict[str, Any]:
    """Everything the management API writes."""
    return {
        "version": db.execute("SELECT version FROM auth_state").fetchone()[0],
        "principals": db.execute(
            "SELECT client_id, is_admin, generation, deleted_at FROM principal ORDER BY client_id"
        ).fetchall(),
        "roles": db.execute("SELECT name FROM role ORDER BY name").fetchall(),
        "members": db.execute("SELECT role_id, principal FROM role_member ORDER BY 1, 2").fetchall(),
        "grants": db.execute("SELECT role_id, privilege, securable FROM role_grant ORDER BY id").fetchall(),
        "warehouses": db.execute(
            "SELECT name, location, storage, allowed_locations FROM warehouse ORDER BY name"
        ).fetchall(),
    }


@pytest.fixture(scope="module", autouse=True)
def _remove_warehouses(principals: Principals):
    """The warehouses this module made go at its end (other modules list warehouses)."""
    yield
    listed = principals.admin.get(f"{M}/warehouses").json()["warehouses"]
    for warehouse in listed:
        if warehouse["name"].startswith("wh-"):
            assert principals.admin.delete(f"{M}/warehouses/{warehouse['name']}").status_code == 204


@pytest.fixture(scope="module")
def callers(app, services, principals: Principals) -> dict[str, Caller]:
    """Made once for the module (argon2 makes principals dear); the module truncates no grant."""
    truncate_catalog(services.database_url)
    manager = principals.new("manager")
    principals.grant(manager, "manage-grants", "catalog")
    plain = principals.new("plain")
    principals.grant(plain, "read", "catalog")
    return {"manager": manager, "plain": plain}


@pytest.mark.parametrize("operation, build, answers", MATRIX, ids=[row[0] for row in MATRIX])
def test_every_operation_for_every_kind_of_caller(principals, callers, db, operation, build, answers):
    for who, expected in zip(("admin", "manager", "plain"), answers, strict=True):
        world = _world(principals)  # touches no grant of the callers: no need to wait for a settle
        client = principals.admin if who == "admin" else callers[who].client
        own_role = world.empty_role if who == "admin" else callers[who].role
        method, path, body = build(world, own_role)
        before = _state(db)
        response = (
            client.request(method, f"{M}{path}", json=body)
            if body is not None
            else client.request(method, f"{M}{path}")
        )
        assert response.status_code == expected, f"{operation} as {who}: {response.text}"
        if expected == 403:
            assert response.json()["error"]["type"] == "ForbiddenException"
            assert _state(db) == before, f"{operation} as {who} was refused but wrote"


# -- the rules one by one ----------------------------------------------------------------------


def test_a_namespace_manager_delegates_what_it_holds_and_nothing_else(principals, db, callers):
    admin = principals.admin
    for path in (["a"], ["a", "b"], ["z"]):
        assert admin.post(f"/v1/{WAREHOUSE}/namespaces", json={"namespace": path}).status_code == 200
    owner = principals.new("owner")
    principals.grant(owner, "manage-grants", "namespace", WAREHOUSE, ("a",))
    principals.grant(owner, "read", "namespace", WAREHOUSE, ("a",))
    team = principals.create_role(_name("team"))
    user = owner.client

    def grant(privilege: str, *path: Any, kind: str = "namespace") -> int:
        body = {"privilege": privilege, "securable": securable_body(kind, *path)}
        return user.post(f"{M}/roles/{team}/grants", json=body).status_code

    assert grant("read", WAREHOUSE, ("a",)) == 201
    assert grant("read", WAREHOUSE, ("a", "b")) == 201  # below what it manages
    assert grant("manage-grants", WAREHOUSE, ("a", "b")) == 201
    before = _state(db)
    assert grant("write", WAREHOUSE, ("a",)) == 403  # a privilege it lacks
    assert grant("read", WAREHOUSE, ("z",)) == 403  # a namespace it does not manage
    assert grant("read", WAREHOUSE, kind="warehouse") == 403  # above it
    assert grant("read", kind="catalog") == 403
    assert _state(db) == before

    # Lists: grants on what it manages, not above; the team's grants (all of which it could give).
    on_a = user.get(f"{M}/grants", params={"type": "namespace", "warehouse": WAREHOUSE, "namespace": "a"})
    assert on_a.status_code == 200 and {g["role"] for g in on_a.json()["grants"]} == {owner.role, team}
    assert user.get(f"{M}/grants", params={"type": "catalog"}).status_code == 403
    assert user.get(f"{M}/roles/{team}/grants").status_code == 200

    # Members: of the team (every grant of it is its to give), not of a role holding more.
    member = principals.new("member")
    assert user.put(f"{M}/roles/{team}/members/{member.name}").status_code == 204
    assert user.get(f"{M}/roles/{team}/members").json() == {"members": [member.name]}
    stronger = principals.create_role(_name("stronger"))
    principals.grant_role(stronger, "read", "namespace", WAREHOUSE, ("z",))
    assert user.put(f"{M}/roles/{stronger}/members/{member.name}").status_code == 403
    assert user.put(f"{M}/roles/{stronger}/members/{owner.name}").status_code == 403  # nor itself
    assert user.delete(f"{M}/roles/{stronger}").status_code == 403
    assert user.delete(f"{M}/roles/{team}").status_code == 204


def test_create_principal_makes_principals_never_administrators(principals, db):
    maker = principals.new("maker")
    principals.grant(maker, "create-principal", "catalog")
    made = maker.client.post(f"{M}/principals", json={"name": _name("etl")})
    assert made.status_code == 201 and made.json()["client-secret"]
    assert maker.client.get(f"{M}/principals/{made.json()['client-id']}").json()["admin"] is False
    before = _state(db)
    refused = maker.client.post(f"{M}/principals", json={"name": _name("boss"), "admin": True})
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "Only administrators may create administrators"
    assert maker.client.post(f"{M}/roles", json={"name": _name("r")}).status_code == 403  # no manage-grants
    assert _state(db) == before
    # create-principal lives on the catalog only.
    body = {"privilege": "create-principal", "securable": securable_body("warehouse", WAREHOUSE)}
    assert principals.admin.post(f"{M}/roles/{maker.role}/grants", json=body).status_code == 400


def test_a_principal_rotates_its_own_secret_and_nobody_elses(app, principals, db):
    admin = principals.admin
    one = admin.post(f"{M}/principals", json={"name": _name("one")}).json()
    other = admin.post(f"{M}/principals", json={"name": _name("other")}).json()
    token = fetch_token(app.anonymous_client(), one["client-id"], one["client-secret"])
    me = app.anonymous_client(headers={"Authorization": f"Bearer {token}"})
    before = _state(db)
    assert me.post(f"{M}/principals/{other['client-id']}/rotate").status_code == 403
    assert _state(db) == before
    rotated = me.post(f"{M}/principals/{one['client-id']}/rotate")
    assert rotated.status_code == 200 and rotated.json()["client-id"] == one["client-id"]
    fetch_token(app.anonymous_client(), one["client-id"], rotated.json()["client-secret"])
    old = app.anonymous_client().post(
        "/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": one["client-id"], "client_secret": one["client-secret"]},
    )
    assert old.status_code == 401


def test_admin_is_a_flag_not_a_privilege(principals, db):
    role = principals.create_role(_name("r"))
    refused = principals.admin.post(f"{M}/roles/{role}/grants", json={"privilege": "admin", "securable": CATALOG})
    assert refused.status_code == 400
    (role_id,) = db.execute("SELECT id FROM role WHERE name = %s", (role,)).fetchone()
    with pytest.raises(psycopg.errors.CheckViolation):  # nor can it be stored behind the API's back
        db.execute("INSERT INTO role_grant (role_id, privilege, securable) VALUES (%s, 'admin', 'catalog')", (role_id,))


def test_a_deleted_principals_memberships_go_and_never_reach_an_idp_user(app, principals, db):
    admin = principals.admin
    holder = principals.new("holder")
    principals.grant(holder, "read", "catalog")
    assert principals.grants.holdings(holder.name).grants  # its role's grant, by membership
    # An IdP user carrying the same name holds nothing of it (only its token's roles claim counts).
    assert principals.grants.holdings(holder.name, (), own=False).grants == []
    authorizer = services_of(app.app).authorizer
    token = current_principal.set(Principal(holder.name, IDP))
    try:
        assert authorizer.grants().held == {}
    finally:
        current_principal.reset(token)

    assert admin.delete(f"{M}/principals/{holder.name}").status_code == 204
    assert db.execute("SELECT count(*) FROM role_member WHERE principal = %s", (holder.name,)).fetchone()[0] == 0
    assert admin.get(f"{M}/roles/{holder.role}/members").json() == {"members": []}
    assert admin.put(f"{M}/roles/{holder.role}/members/{holder.name}").status_code == 404  # a deleted principal
