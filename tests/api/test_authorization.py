"""Authorization beyond the matrix (issue 16): inheritance down nested namespaces, listings that
show only what the caller may see, no existence leak, rename, transactions, idempotency keys per
principal, IdP roles, read-only signing, revocation, and the audit line of a refusal."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from app.authorization import Authorizer
from app.composition.services import services_of
from app.ground.callers import IDP, Principal, current_principal
from app.rules.privileges import Kind, Privilege, Securable
from app.storage_access.s3_requests import READ, WRITE
from tests.api.authz_support import PREFIX, WAREHOUSE, catalog_state, database_version, denied
from tests.api.tables_support import create_request

pytestmark = pytest.mark.usefixtures("clean_catalog")


@pytest.fixture
def admin(app):
    return app.test_client()


def namespaces(admin, *paths: str) -> None:
    for path in paths:
        response = admin.post(f"{PREFIX}/namespaces", json={"namespace": path.split(".")})
        assert response.status_code == 200, response.text


def tables(admin, *names: str) -> None:
    for name in names:
        *levels, table = name.split(".")
        response = admin.post(f"{PREFIX}/namespaces/{'%1F'.join(levels)}/tables", json=create_request(table))
        assert response.status_code == 200, response.text


def table_url(name: str) -> str:
    *levels, table = name.split(".")
    return f"{PREFIX}/namespaces/{'%1F'.join(levels)}/tables/{table}"


def test_a_grant_on_a_namespace_covers_everything_below_it(admin, principals):
    namespaces(admin, "a", "a.b", "a.c")
    tables(admin, "a.b.t", "a.c.t")
    reader = principals.new("reader")
    principals.grant(reader, "read", "namespace", WAREHOUSE, ("a",))
    assert reader.client.get(table_url("a.b.t")).status_code == 200
    assert reader.client.get(table_url("a.c.t")).status_code == 200

    narrow = principals.new("narrow")
    principals.grant(narrow, "read", "namespace", WAREHOUSE, ("a", "b"))
    assert narrow.client.get(table_url("a.b.t")).status_code == 200
    hidden = narrow.client.get(table_url("a.c.t"))  # a.c is not visible to it: no leak
    assert hidden.status_code == 404 and hidden.json()["error"]["type"] == "NoSuchTableException"
    # a.c itself: 403, as it is inside a, which narrow sees (whether or not a.c exists)
    assert denied(narrow.client.get(f"{PREFIX}/namespaces/a%1Fc/tables"))
    assert denied(narrow.client.get(f"{PREFIX}/namespaces/a%1Fnone/tables"))
    assert narrow.client.head(f"{PREFIX}/namespaces/a").status_code == 204  # the way down to a.b


def test_a_table_grant_covers_that_table_only(admin, principals):
    namespaces(admin, "a")
    tables(admin, "a.t1", "a.t2")
    reader = principals.new("one-table")
    principals.grant(reader, "read", "table", WAREHOUSE, ("a",), "t1")
    assert reader.client.get(table_url("a.t1")).status_code == 200
    assert denied(reader.client.get(table_url("a.t2")))  # it sees a (its table is there): 403
    assert denied(reader.client.post(table_url("a.t1"), json={"requirements": [], "updates": []}))


def test_listings_show_only_what_the_caller_may_see(admin, principals):
    namespaces(admin, "a", "a.b", "a.c", "z")
    tables(admin, "a.t1", "a.t2", "z.t")
    caller = principals.new("lister")
    principals.grant(caller, "read", "table", WAREHOUSE, ("a",), "t1")
    principals.grant(caller, "read", "namespace", WAREHOUSE, ("a", "b"))
    top = caller.client.get(f"{PREFIX}/namespaces")
    assert top.status_code == 200 and top.json()["namespaces"] == [["a"]]
    nested = caller.client.get(f"{PREFIX}/namespaces?parent=a")
    assert nested.json()["namespaces"] == [["a", "b"]]
    listed = caller.client.get(f"{PREFIX}/namespaces/a/tables").json()["identifiers"]
    assert listed == [{"namespace": ["a"], "name": "t1"}]
    assert denied(caller.client.get(f"{PREFIX}/namespaces/z/tables"))
    everything = admin.get(f"{PREFIX}/namespaces").json()["namespaces"]
    assert sorted(everything) == [["a"], ["z"]]


def test_no_existence_leak(admin, principals):
    """The answer for something the caller may not use never depends on whether it exists."""
    namespaces(admin, "a", "secret")
    tables(admin, "a.t", "secret.t")
    caller = principals.new("leak")
    principals.grant(caller, "create", "namespace", WAREHOUSE, ("a",))
    existing, missing = caller.client.get(table_url("a.t")), caller.client.get(table_url("a.missing"))
    assert denied(existing) and denied(missing)  # the same answer whether it exists or not
    hidden, absent = caller.client.get(table_url("secret.t")), caller.client.get(table_url("nowhere.t"))
    assert hidden.status_code == absent.status_code == 404
    assert hidden.json()["error"]["type"] == absent.json()["error"]["type"] == "NoSuchTableException"
    assert caller.client.head(table_url("secret.t")).status_code == 404
    # top-level namespaces are in the warehouse, which it sees: 403 for both
    assert denied(caller.client.get(f"{PREFIX}/namespaces/secret"))
    assert denied(caller.client.get(f"{PREFIX}/namespaces/nowhere"))


def test_rename_needs_drop_at_the_source_and_create_at_the_destination(admin, principals, db):
    namespaces(admin, "a", "z")
    tables(admin, "a.t")
    caller = principals.new("mover")
    principals.grant(caller, "drop", "namespace", WAREHOUSE, ("a",))
    rename = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["z"], "name": "t"}}
    before = catalog_state(db)
    assert denied(caller.client.post(f"{PREFIX}/tables/rename", json=rename))  # no CREATE on z
    assert catalog_state(db) == before
    principals.grant(caller, "create", "namespace", WAREHOUSE, ("z",))
    within = {**rename, "destination": {"namespace": ["a"], "name": "t2"}}
    assert denied(caller.client.post(f"{PREFIX}/tables/rename", json=within))  # no CREATE on a
    assert caller.client.post(f"{PREFIX}/tables/rename", json=rename).status_code == 204
    assert admin.head(table_url("z.t")).status_code == 204


def test_a_renamed_table_keeps_its_grant(admin, principals):
    """Grants point at ids; the cached paths follow a rename (0011 bumps the version)."""
    namespaces(admin, "a")
    tables(admin, "a.t")
    reader = principals.new("follower")
    principals.grant(reader, "read", "table", WAREHOUSE, ("a",), "t")
    rename = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["a"], "name": "moved"}}
    assert admin.post(f"{PREFIX}/tables/rename", json=rename).status_code == 204
    principals.settle()
    assert reader.client.get(table_url("a.moved")).status_code == 200
    assert denied(reader.client.get(table_url("a.t")))
    tables(admin, "a.t")  # a new table under the old name is not the granted one
    assert denied(reader.client.get(table_url("a.t")))


def test_a_transaction_needs_write_on_every_table_before_anything_is_written(admin, principals, db):
    namespaces(admin, "a")
    tables(admin, "a.t1", "a.t2")
    writer = principals.new("tx")
    principals.grant(writer, "write", "table", WAREHOUSE, ("a",), "t1")
    change = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    body = {
        "table-changes": [
            {"identifier": {"namespace": ["a"], "name": "t1"}, **change},
            {"identifier": {"namespace": ["a"], "name": "t2"}, **change},
        ]
    }
    before = catalog_state(db)
    refused = writer.client.post(f"{PREFIX}/transactions/commit", json=body)
    assert denied(refused) and "a.t2" in refused.json()["error"]["message"]
    assert catalog_state(db) == before
    body["table-changes"] = body["table-changes"][:1]
    assert writer.client.post(f"{PREFIX}/transactions/commit", json=body).status_code == 204


def test_idempotency_keys_are_per_principal(admin, principals, db):
    namespaces(admin, "a")
    first, second = principals.new("idem1"), principals.new("idem2")
    for caller in (first, second):
        principals.grant(caller, "create", "namespace", WAREHOUSE, ("a",))
    key = str(uuid.uuid4())
    body = {"namespace": ["a", "n"]}
    created = first.client.post(f"{PREFIX}/namespaces", json=body, headers={"Idempotency-Key": key})
    assert created.status_code == 200
    replayed = first.client.post(f"{PREFIX}/namespaces", json=body, headers={"Idempotency-Key": key})
    assert replayed.status_code == 200 and replayed.headers.get("Idempotent-Replayed") == "true"
    other = second.client.post(f"{PREFIX}/namespaces", json=body, headers={"Idempotency-Key": key})
    assert other.status_code == 409 and "Idempotent-Replayed" not in other.headers  # it ran: not a replay
    assert db.execute("SELECT count(*) FROM idempotency_key WHERE key = %s", (key,)).fetchone()[0] == 2


def test_an_idp_token_holds_what_its_roles_claim_names(app, principals, settings):
    """Roles named in the IdP token's roles claim are held without any membership."""
    role = f"analysts-{uuid.uuid4().hex[:6]}"
    principals.create_role(role)
    principals.grant_role(role, "read", "warehouse", WAREHOUSE)
    authorizer = Authorizer(principals.grants, lambda: None)
    table = Securable.of_entry(Kind.TABLE, WAREHOUSE, ("a",), "t")
    for roles, expected in (((role,), True), ((), False), (("someone-else",), False)):
        token = current_principal.set(Principal("alice@example.com", IDP, roles))
        try:
            assert authorizer.may(Privilege.READ, table) is expected
            assert authorizer.may(Privilege.WRITE, table) is False
        finally:
            current_principal.reset(token)


def test_read_only_callers_get_read_only_signing_and_credentials(app, principals):
    """The signer's privileges hook and vended credentials: READ reads; writes need WRITE; a
    staged table (no row yet) is its stager's: CREATE on the namespace reads and writes it."""
    from app.composition.services import services_of
    from app.storage_access.signing import RemoteSigner

    tables_service = services_of(app.app).tables
    assert tables_service.access.authorizer is services_of(app.app).authorizer
    signer = RemoteSigner(tables_service.settings, tables_service.access)
    caller = principals.new("signer")
    principals.grant(caller, "read", "warehouse", WAREHOUSE)
    token = current_principal.set(Principal(caller.name, "growler"))
    try:
        assert signer.privileges(WAREHOUSE, ("a",), "t", staged=False) == frozenset({READ})
        assert signer.privileges(WAREHOUSE, ("a",), "t", staged=True) == frozenset()
        assert not tables_service.entries.may_write(WAREHOUSE, ("a",), "t")
        principals.grant(caller, "write", "warehouse", WAREHOUSE)
        assert signer.privileges(WAREHOUSE, ("a",), "t", staged=False) == frozenset({READ, WRITE})
        assert signer.privileges(WAREHOUSE, ("a",), "t", staged=True) == frozenset()
        assert tables_service.entries.may_write(WAREHOUSE, ("a",), "t")
        principals.grant(caller, "create", "warehouse", WAREHOUSE)
        assert signer.privileges(WAREHOUSE, ("a",), "t", staged=True) == frozenset({READ, WRITE})
    finally:
        current_principal.reset(token)


def test_read_only_sts_credentials_allow_no_writes():
    from storage.sts import WRITE_ACTIONS, session_policy

    actions = {a for s in session_policy("s3://bucket-x/wh/a/t", write=False)["Statement"] for a in s["Action"]}
    assert actions and not actions & set(WRITE_ACTIONS)


def test_a_revoke_takes_effect_at_the_first_poll_that_sees_it(admin, principals):
    """ "Within a second" is the poll of ``auth_state.version`` (0.5 s in production): decisions are
    cached under the version the poll read, so from the moment the app's state has read the version
    the revoke wrote, no request is allowed - not one served from the cache. Asserted in versions
    (the app's against the database's), not seconds: a slow or busy machine delays the poll but
    cannot make a request after it allowed. The deadline only stops a poll that never comes."""
    namespaces(admin, "a")
    tables(admin, "a.t")
    reader = principals.new("revoked")
    principals.grant(reader, "read", "namespace", WAREHOUSE, ("a",))
    assert reader.client.get(table_url("a.t")).status_code == 200  # cached now
    principals.revoke(reader, "read", "namespace", WAREHOUSE, ("a",), settle=False)
    revoked = database_version(principals.database_url)
    seen = services_of(principals.app.app).authorizer._version
    hang_guard = time.monotonic() + 60
    while (seen() or 0) < revoked:  # before the poll read the revoke: allowed or not, either is fine
        reader.client.get(table_url("a.t"))
        assert time.monotonic() < hang_guard, "the auth state never read the revoke's version"
    assert reader.client.get(table_url("a.t")).status_code == 404  # nothing left: a is hidden again


def test_a_refusal_is_one_audit_line_without_secrets(admin, principals, capsys):
    namespaces(admin, "a")
    caller = principals.new("audited")
    principals.grant(caller, "read", "namespace", WAREHOUSE, ("a",))
    capsys.readouterr()
    response = caller.client.post(f"{PREFIX}/namespaces/a/properties", json={"updates": {"k": "v"}})
    assert denied(response)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"growler.audit"' in line]
    assert len(lines) == 1
    (line,) = lines
    assert line["event"] == "audit" and line["principal"] == caller.name and line["action"] == "updateProperties"
    assert line["target"] == {"securable": "namespace test:a", "privilege": "manage-properties"}
    assert line["outcome"] == "forbidden" and line["status"] == 403
    assert line["request_id"] == response.headers["X-Request-Id"]
    assert "Bearer" not in json.dumps(line) and "token" not in json.dumps(line)
    hidden = caller.client.get(f"{PREFIX}/namespaces/z%1Fy")  # z is not visible to it: the 404, audited as hidden
    assert hidden.status_code == 404
    (line,) = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"growler.audit"' in line]
    assert line["action"] == "loadNamespaceMetadata" and line["target"]["securable"].startswith("namespace test:z")
    assert line["outcome"] == "hidden" and line["status"] == 404
