"""Read restrictions (issue 51, docs/read-restrictions.md) through the catalog and management APIs.

Two principals read one table: ``restricted`` (its role restricted to region eu, without the
salary column, with masked emails) and ``free``. An untrusted restricted caller gets 403 and no
storage access; a trusted engine gets the spec's ``read-restrictions``; the restrictions follow a
rename and the recycle bin (undrop), are inherited from a namespace, combine across roles, name
the caller, and every change enters the change feed - a refused one writes nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.api.authz_support import MANAGEMENT, Caller, catalog_state
from tests.api.tables_support import PREFIX, table_url, tables_url
from tests.api.test_events import everything
from tests.conftest import TEST_CLIENT_ID

RESTRICTIONS = f"{MANAGEMENT}/warehouses/test/read-restrictions"
PEOPLE: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "region", "type": "string", "required": False},
        {"id": 3, "name": "salary", "type": "double", "required": False},
        {"id": 4, "name": "email", "type": "string", "required": False},
    ],
}
EU_ONLY = {"type": "eq", "term": "region", "value": "eu"}
NO_SALARY = [{"name": "salary", "action": "hide"}, {"name": "email", "action": "mask-alphanum"}]


def _table(kind: str = "table", name: str | None = "people", namespace: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": kind}
    if kind != "warehouse":
        body["namespace"] = namespace or ["hr"]
    if name is not None and kind in ("table", "view"):
        body["name"] = name
    return body


def restrict(client: Any, grantee: tuple[str, str], securable: dict[str, Any], **policy: Any) -> Any:
    body = {"securable": securable, "grantee": {"type": grantee[0], "name": grantee[1]}, **policy}
    return client.post(RESTRICTIONS, json=body)


def trust(client: Any, principal: str, trusted: bool = True) -> Any:
    return client.put(f"{MANAGEMENT}/principals/{principal}/trusted-engine", json={"trusted-engine": trusted})


@pytest.fixture
def people(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["hr"]}).status_code == 200
    response = client.post(tables_url("hr"), json={"name": "people", "schema": PEOPLE})
    assert response.status_code == 200, response.text
    return table_url("people", "hr")


@pytest.fixture
def auditors(principals) -> str:
    """A role of the test's own (roles outlive a test's catalog)."""
    return principals.create_role(f"auditors-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def readers(principals, people) -> tuple[Caller, Caller]:
    restricted, free = principals.new("restricted"), principals.new("free")
    for caller in (restricted, free):
        principals.grant(caller, "read", "table", "test", ("hr",), "people")
    return restricted, free


def test_an_untrusted_restricted_caller_gets_403_and_no_storage_access(client, principals, people, readers):
    restricted, free = readers
    response = restrict(client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY, "columns": NO_SALARY})
    assert response.status_code == 200, response.text
    principals.settle()

    refused = restricted.client.get(people)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["type"] == "ForbiddenException"
    assert f"read restrictions for principal {restricted.name}" in error["message"]
    assert "trusted engine" in error["message"]  # and what to do next
    headers = {"X-Iceberg-Access-Delegation": "vended-credentials"}
    assert restricted.client.get(people, headers=headers).status_code == 403
    assert restricted.client.get(f"{people}/credentials").status_code == 403

    answer = free.client.get(people)
    assert answer.status_code == 200
    assert "read-restrictions" not in answer.json()


def test_a_trusted_engine_gets_the_spec_read_restrictions(client, principals, people, readers):
    restricted, free = readers
    assert (
        restrict(
            client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY, "columns": NO_SALARY}
        ).status_code
        == 200
    )
    trusted = trust(client, restricted.name)
    assert trusted.status_code == 200, trusted.text
    assert trusted.json()["trusted-engine"] is True
    principals.settle()

    answer = restricted.client.get(people)
    assert answer.status_code == 200, answer.text
    assert answer.json()["read-restrictions"] == {
        "required-row-filter": {"type": "eq", "term": "region", "value": "eu"},
        "required-column-projections": [
            {"action": "replace-with-null", "field-id": 3},  # hidden: an engine is told null
            {"action": "mask-alphanum", "field-id": 4},
        ],
    }
    # The answer is the caller's: another caller's ETag for the same version is not this one's.
    free_answer = free.client.get(people)
    assert free_answer.headers["ETag"] != answer.headers["ETag"]
    assert restricted.client.get(people, headers={"If-None-Match": free_answer.headers["ETag"]}).status_code == 200
    assert restricted.client.get(people, headers={"If-None-Match": answer.headers["ETag"]}).status_code == 304

    # Untrusting it again closes the door at once (within the authorization poll).
    assert trust(client, restricted.name, False).status_code == 200
    principals.settle()
    assert restricted.client.get(people).status_code == 403
    assert restricted.client.get(people, headers={"If-None-Match": answer.headers["ETag"]}).status_code == 403


def test_restrictions_inherit_combine_across_roles_and_name_the_caller(client, principals, people, readers):
    restricted, _ = readers
    second = principals.create_role(f"analysts-{restricted.name}")
    assert client.put(f"{MANAGEMENT}/roles/{second}/members/{restricted.name}").status_code == 204
    mine = {"type": "eq", "term": "email", "value": "${principal}"}
    assert (
        restrict(client, ("role", restricted.role), _table("namespace", None), **{"row-filter": EU_ONLY}).status_code
        == 200
    )
    response = restrict(
        client,
        ("role", second),
        _table(),
        **{"row-filter": mine, "columns": [{"name": "email", "action": "show-last-4"}]},
    )
    assert response.status_code == 200, response.text
    by_name = restrict(client, ("principal", restricted.name), _table(), columns=[{"name": "email", "action": "hide"}])
    assert by_name.status_code == 200, by_name.text
    assert trust(client, restricted.name).status_code == 200
    principals.settle()

    restrictions = restricted.client.get(people).json()["read-restrictions"]
    # both filters (and-ed), the caller's name put in; of show-last-4 and hide, the stricter
    rendered = restrictions["required-row-filter"]
    assert rendered["type"] == "and"
    assert {rendered["left"]["term"], rendered["right"]["term"]} == {"region", "email"}
    assert {rendered["left"]["value"], rendered["right"]["value"]} == {"eu", restricted.name}
    assert restrictions["required-column-projections"] == [{"action": "replace-with-null", "field-id": 4}]


def test_restrictions_follow_a_rename_and_come_back_with_an_undrop(client, principals, people, readers, db):
    restricted, _ = readers
    assert restrict(client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY}).status_code == 200
    rename = {
        "source": {"namespace": ["hr"], "name": "people"},
        "destination": {"namespace": ["hr"], "name": "staff"},
    }
    assert client.post(f"{PREFIX}/tables/rename", json=rename).status_code == 204
    principals.settle()
    assert restricted.client.get(table_url("staff", "hr")).status_code == 403  # its grant and restriction moved

    assert client.delete(table_url("staff", "hr")).status_code == 204  # into the bin
    assert db.execute("SELECT count(*) FROM read_restriction").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM bin_read_restriction").fetchone()[0] == 1
    unit = client.get(f"{MANAGEMENT}/warehouses/test/bin").json()["units"][0]["id"]
    assert client.post(f"{MANAGEMENT}/warehouses/test/bin/{unit}/undrop", json={}).status_code == 200
    principals.settle()
    assert db.execute("SELECT count(*) FROM read_restriction").fetchone()[0] == 1
    assert restricted.client.get(table_url("staff", "hr")).status_code == 403

    # a table created again at the old name is another table: not restricted by the dropped one's
    assert client.delete(table_url("staff", "hr")).status_code == 204
    assert client.post(tables_url("hr"), json={"name": "staff", "schema": PEOPLE}).status_code == 200
    principals.grant(restricted, "read", "table", "test", ("hr",), "staff")
    assert restricted.client.get(table_url("staff", "hr")).status_code == 200


def test_setting_listing_and_removing_enter_the_feed(client, people, auditors):
    body = {"row-filter": EU_ONLY, "columns": NO_SALARY}
    answer = restrict(client, ("role", auditors), _table(), **body)
    assert answer.status_code == 200
    assert answer.json() == {
        "securable": {"type": "table", "namespace": ["hr"], "name": "people"},
        "grantee": {"type": "role", "name": auditors},
        "row-filter": EU_ONLY,
        "columns": NO_SALARY,
        "created-by": TEST_CLIENT_ID,
    }
    assert client.get(RESTRICTIONS).json() == {"restrictions": [answer.json()]}
    target = {"securable": _table(), "grantee": {"type": "role", "name": auditors}}
    assert client.post(f"{RESTRICTIONS}/remove", json=target).status_code == 204
    assert client.post(f"{RESTRICTIONS}/remove", json=target).status_code == 404
    assert client.get(RESTRICTIONS).json() == {"restrictions": []}


def test_feed_records_each_change(client, people, auditors, db):
    assert restrict(client, ("role", auditors), _table(), **{"row-filter": EU_ONLY}).status_code == 200
    target = {"securable": _table(), "grantee": {"type": "role", "name": auditors}}
    assert client.post(f"{RESTRICTIONS}/remove", json=target).status_code == 204
    kinds = [
        row[0]
        for row in db.execute(
            "SELECT operation->>'custom-type' FROM change_event WHERE stream = 0 ORDER BY position"
        ).fetchall()
    ]
    assert kinds[-2:] == ["x-set-read-restriction", "x-remove-read-restriction"]


@pytest.mark.parametrize(
    ("policy", "status", "words"),
    [
        ({"columns": [{"name": "salary", "action": "blur"}]}, 400, ""),
        ({"columns": [{"name": "nope", "action": "hide"}]}, 400, "Cannot find column 'nope'"),
        ({"columns": [{"name": "salary", "action": "show-last-4"}]}, 400, "does not apply to salary"),
        ({"row-filter": {"type": "eq", "term": "nope", "value": 1}}, 400, "Invalid row-filter"),
        ({"row-filter": {"type": "near", "term": "region"}}, 400, "not an Iceberg expression"),
        ({}, 400, "needs a row-filter, columns, or both"),
        (
            {"columns": [{"name": "salary", "action": "hide"}, {"name": "salary", "action": "sha-256-global"}]},
            400,
            "more than one rule",
        ),
    ],
)
def test_bad_restrictions_are_refused_and_write_nothing(client, people, auditors, db, policy, status, words):
    before = catalog_state(db), db.execute("SELECT count(*) FROM read_restriction").fetchone()[0]
    response = restrict(client, ("role", auditors), _table(), **policy)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]
    assert (catalog_state(db), db.execute("SELECT count(*) FROM read_restriction").fetchone()[0]) == before


def test_where_a_restriction_may_not_go(client, people, auditors, db):
    missing_view = restrict(client, ("role", auditors), _table("view", "w"), **{"row-filter": EU_ONLY})
    assert missing_view.status_code == 404, missing_view.text
    no_role = restrict(client, ("role", "nobody"), _table(), **{"row-filter": EU_ONLY})
    assert no_role.status_code == 404
    assert "Role does not exist: nobody" in no_role.json()["error"]["message"]
    assert db.execute("SELECT count(*) FROM read_restriction").fetchone()[0] == 0


def test_only_a_grant_manager_of_the_table_restricts_and_only_an_admin_trusts(client, principals, people, readers, db):
    restricted, free = readers
    refused = restrict(free.client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY})
    assert refused.status_code == 403
    principals.grant(free, "manage-grants", "table", "test", ("hr",), "people")
    allowed = restrict(free.client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY})
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["created-by"] == free.name
    assert trust(free.client, free.name).status_code == 403  # not its own to grant
    created = free.client.post(f"{MANAGEMENT}/principals", json={"name": "engine-x", "trusted-engine": True})
    assert created.status_code == 403
    trusted = db.execute(
        "SELECT count(*) FROM principal WHERE trusted_engine AND client_id IN (%s, 'engine-x')", (free.name,)
    ).fetchone()[0]
    assert trusted == 0


def view_body(name: str, sql: str, namespace: str = "hr") -> dict[str, Any]:
    """A createView body of one column (what the view reads does not matter here)."""
    return {
        "name": name,
        "schema": {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 1, "name": "id", "type": "long", "required": True}],
        },
        "view-version": {
            "version-id": 1,
            "timestamp-ms": 1_700_000_000_000,
            "schema-id": 0,
            "summary": {"engine-name": "test"},
            "default-namespace": [namespace],
            "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        },
        "properties": {},
    }


def test_a_restricted_caller_cannot_shed_its_restrictions_by_drop_or_unregister_then_register(
    client, principals, people, readers, db
):
    """Iceberg's sequences (unregister then register, drop then register) make a new entry,
    without the table's own restrictions: a restricted caller may not start them; a grant manager
    without restrictions may, and the sequences work on the default warehouse."""
    restricted, _ = readers
    for privilege in ("drop", "create"):
        principals.grant(restricted, privilege, "namespace", "test", ("hr",))
    assert restrict(client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY}).status_code == 200
    principals.settle()
    before = catalog_state(db)
    for refused in (
        restricted.client.post(f"{people}/unregister"),
        restricted.client.delete(people),
        restricted.client.delete(people, params={"purgeRequested": "true"}),
    ):
        assert refused.status_code == 403, refused.text
        message = refused.json()["error"]["message"]
        assert "reads it under read restrictions" in message and "a grant manager" in message
    assert catalog_state(db) == before
    assert db.execute("SELECT count(*) FROM read_restriction").fetchone()[0] == 1

    # the unrestricted admin: unregister then register, drop then register at the same files
    unregistered = client.post(f"{people}/unregister")
    assert unregistered.status_code == 200, unregistered.text
    location = unregistered.json()["metadata-location"]
    register = {"name": "people", "metadata-location": location}
    assert client.post(f"{PREFIX}/namespaces/hr/register", json=register).status_code == 200
    assert client.delete(people).status_code == 204
    assert client.post(f"{PREFIX}/namespaces/hr/register", json=register).status_code == 200
    assert client.get(people).status_code == 200


def test_a_restricted_caller_cannot_drop_a_namespace_with_its_restricted_tables_then_register_them(
    client, principals, people, readers, db
):
    """A recursive drop takes the namespace's tables along; registered again they would be new
    entries without their restrictions. Refused to a caller restricted at, above or below the
    namespace (403, nothing written); one restricted elsewhere only, and the admin, may."""
    restricted, free = readers
    for namespace in (["hr", "archive"], ["hr", "legal"], ["fin"]):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": namespace}).status_code == 200
    for caller in (restricted, free):
        principals.grant(caller, "drop", "namespace", "test", ("hr",))
    assert restrict(client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY}).status_code == 200
    fin = _table("namespace", namespace=["fin"])
    assert restrict(client, ("role", free.role), fin, columns=NO_SALARY).status_code == 200  # elsewhere only
    principals.settle()
    namespaces = f"{MANAGEMENT}/warehouses/test/namespaces"
    recursive = {"recursive": "true"}

    before = catalog_state(db)
    refused = restricted.client.delete(f"{namespaces}/hr", params=recursive)  # hr.people is under it
    assert refused.status_code == 403, refused.text
    message = refused.json()["error"]["message"]
    assert "under read restrictions" in message and "a grant manager" in message
    assert catalog_state(db) == before
    assert db.execute("SELECT count(*) FROM read_restriction").fetchone()[0] == 2
    # nothing restricted at, above or below hr.archive: its drop goes ahead
    assert restricted.client.delete(f"{namespaces}/hr%1Farchive", params=recursive).status_code == 200

    # restricted on hr itself: refused below it too
    above = restrict(client, ("role", restricted.role), _table("namespace", namespace=["hr"]), columns=NO_SALARY)
    assert above.status_code == 200, above.text
    principals.settle()
    assert restricted.client.delete(f"{namespaces}/hr%1Flegal", params=recursive).status_code == 403

    dropped = free.client.delete(f"{namespaces}/hr", params=recursive)
    assert dropped.status_code == 200, dropped.text
    assert client.get(people).status_code == 404


def test_a_restricted_caller_reads_the_tables_events_only_as_a_trusted_engine(client, principals, people, readers):
    """A table's events carry what loadTable would (its updates: snapshots with their summaries,
    schemas, properties): the feed serves them to a caller restricted on the table only when it is a
    trusted engine, as loadTable does; the other reader gets them as before."""
    restricted, free = readers
    update = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "hr"}}]}
    assert client.post(people, json=update).status_code == 200
    assert restrict(client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY}).status_code == 200
    principals.settle()

    def about_people(caller: Caller) -> list[str]:
        return [
            event["operation"]["operation-type"]
            for event in everything(caller.client)
            if event["operation"].get("identifier", {}).get("name") == "people"
        ]

    assert about_people(free) == ["create-table", "update-table"]
    assert about_people(restricted) == []
    assert trust(client, restricted.name).status_code == 200
    principals.settle()
    assert about_people(restricted) == ["create-table", "update-table"]


def test_a_role_marked_trusted_makes_its_holders_trusted_engines(client, principals, people, readers, db):
    """setRoleTrustedEngine (administrators): every holder of the role is a trusted engine - the
    way to trust an identity provider's principals (tests/integration: Keycloak) - and unmarking
    it closes the door again; a grant manager may not mark one."""
    restricted, free = readers
    assert restrict(client, ("role", restricted.role), _table(), **{"row-filter": EU_ONLY}).status_code == 200
    principals.settle()
    assert restricted.client.get(people).status_code == 403

    engines = principals.create_role(f"engines-{uuid.uuid4().hex[:8]}")
    assert client.put(f"{MANAGEMENT}/roles/{engines}/members/{restricted.name}").status_code == 204
    assert client.get(f"{MANAGEMENT}/roles/{engines}").json()["trusted-engine"] is False
    principals.grant_role(free.role, "manage-grants", "warehouse", "test")
    principals.settle()
    refused = free.client.put(f"{MANAGEMENT}/roles/{engines}/trusted-engine", json={"trusted-engine": True})
    assert refused.status_code == 403, refused.text
    marked = client.put(f"{MANAGEMENT}/roles/{engines}/trusted-engine", json={"trusted-engine": True})
    assert marked.status_code == 200, marked.text
    assert marked.json()["trusted-engine"] is True
    assert client.get(f"{MANAGEMENT}/roles/{engines}").json()["trusted-engine"] is True
    newest = "SELECT operation->>'custom-type' FROM change_event WHERE stream = 0 ORDER BY position DESC LIMIT 1"
    assert db.execute(newest).fetchone()[0] == "x-set-trusted-engine"
    principals.settle()
    answer = restricted.client.get(people)
    assert answer.status_code == 200, answer.text
    assert answer.json()["read-restrictions"]["required-row-filter"] == EU_ONLY

    assert client.put(f"{MANAGEMENT}/roles/{engines}/trusted-engine", json={"trusted-engine": False}).status_code == 200
    principals.settle()
    assert restricted.client.get(people).status_code == 403
    missing = client.put(f"{MANAGEMENT}/roles/no-such-role/trusted-engine", json={"trusted-engine": True})
    assert missing.status_code == 404
