"""Deletion protection (issue 35): a mark on a table, view, namespace or warehouse refuses drop,
purge, unregister, rename and recursive drop with 409 for every principal, administrators
included, writing nothing; removing a mark needs manage-grants; a warehouse that refuses deletes
signs no DELETE and vends credentials without s3:DeleteObject."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import minio
import pytest
from minio.error import S3Error
from prometheus_client import REGISTRY

from app.composition.services import services_of
from app.ground.locations import Location
from storage.sts import session_policy
from tests.api.bin_support import PROTECTIONS, M, bin_state, protect, unprotect
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url
from tests.api.test_recycle_bin import VIEW_BODY
from tests.conftest import TEST_BUCKET

RENAME_TABLE = f"{PREFIX}/tables/rename"
RENAME_VIEW = f"{PREFIX}/views/rename"


def _rename(kind: str, name: str, to: str) -> dict[str, Any]:
    return {"source": {"namespace": ["db", "in"], "name": name}, "destination": {"namespace": ["db", "in"], "name": to}}


# Every destructive operation on what the catalog below holds: (label, call).
OPERATIONS: list[tuple[str, Callable[[Any], Any]]] = [
    ("dropTable", lambda c: c.delete(table_url("t", "db%1Fin"))),
    ("dropTable purge", lambda c: c.delete(table_url("t", "db%1Fin"), params={"purgeRequested": "true"})),
    ("unregisterTable", lambda c: c.post(f"{table_url('t', 'db%1Fin')}/unregister")),
    ("renameTable", lambda c: c.post(RENAME_TABLE, json=_rename("table", "t", "t2"))),
    ("dropView", lambda c: c.delete(f"{PREFIX}/namespaces/db%1Fin/views/v")),
    ("renameView", lambda c: c.post(RENAME_VIEW, json=_rename("view", "v", "v2"))),
    ("dropNamespace", lambda c: c.delete(f"{PREFIX}/namespaces/db%1Fempty")),
    ("recursive drop", lambda c: c.delete(f"{M}/warehouses/test/namespaces/db", params={"recursive": "true"})),
]
# What each mark covers (the warehouse's and the top namespace's cover everything).
MARKS: dict[str, tuple[tuple[str, list[str] | None, str | None], set[str]]] = {
    "table": (("table", ["db", "in"], "t"), {"dropTable", "dropTable purge", "unregisterTable", "renameTable"}),
    "view": (("view", ["db", "in"], "v"), {"dropView", "renameView"}),
    "namespace": (("namespace", ["db"], None), {label for label, _ in OPERATIONS}),
    "warehouse": (("warehouse", None, None), {label for label, _ in OPERATIONS}),
}


@pytest.fixture
def catalog(client):
    for path in (["db"], ["db", "in"], ["db", "empty"]):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": path}).status_code == 200
    assert client.post(tables_url("db%1Fin"), json=create_request("t")).status_code == 200
    assert client.post(f"{PREFIX}/namespaces/db%1Fin/views", json=VIEW_BODY).status_code == 200


@pytest.fixture
def owner(principals, catalog):
    """A principal holding every privilege on the warehouse, manage-grants included."""
    caller = principals.new("owner")
    for privilege in ("write", "create", "drop", "manage-properties", "manage-grants", "undrop"):
        principals.grant(caller, privilege, "warehouse", "test")
    return caller


@pytest.mark.parametrize("mark", list(MARKS))
def test_every_destructive_operation_is_refused_for_everyone(client, catalog, owner, db, mark):
    (kind, namespace, name), covered = MARKS[mark]
    assert protect(client, kind, namespace, name).status_code == 204
    before = bin_state(db)
    refused = REGISTRY.get_sample_value("growler_protection_events_total", {"action": "refused", "kind": "table"}) or 0
    for who, caller in (("admin", client), ("owner", owner.client)):
        for label, call in OPERATIONS:
            if label not in covered:
                continue
            response = call(caller)
            assert response.status_code == 409, (mark, who, label, response.text)
            error = response.json()["error"]
            assert error["type"] == "ProtectedException" and "is protected" in error["message"], error
            assert bin_state(db) == before, (mark, who, label)
    if "dropTable" in covered:  # each refusal counted (growler_protection_events_total)
        after = REGISTRY.get_sample_value("growler_protection_events_total", {"action": "refused", "kind": "table"})
        assert after >= refused + 8
    listed = client.get(PROTECTIONS).json()["marks"]
    assert listed == [{k: v for k, v in {"type": kind, "namespace": namespace, "name": name}.items() if v}]


def test_unprotect_needs_manage_grants_and_then_the_drop_works(client, catalog, owner, principals, db):
    assert protect(client, "table", ["db", "in"], "t").status_code == 204
    writer = principals.new("writer")
    principals.grant(writer, "drop", "warehouse", "test")
    assert protect(writer.client, "table", ["db", "in"], "t").status_code == 403
    refused = unprotect(writer.client, "table", ["db", "in"], "t")
    assert refused.status_code == 403 and "manage-grants" in refused.json()["error"]["message"]
    assert writer.client.delete(table_url("t", "db%1Fin")).status_code == 409  # its drop privilege is not enough
    assert unprotect(owner.client, "table", ["db", "in"], "t").status_code == 204
    assert client.get(PROTECTIONS).json()["marks"] == []
    assert writer.client.delete(table_url("t", "db%1Fin")).status_code == 204
    assert db.execute("SELECT count(*) FROM bin_unit").fetchone()[0] == 1
    assert unprotect(client, "table", ["db", "in"], "missing").status_code == 404


def test_a_protected_warehouse_is_not_deleted(client, settings):
    from storage.objects import S3ObjectStore

    S3ObjectStore(settings.s3).ensure_bucket("growler-test-second")
    body = {"name": "kept", "location": "s3://growler-test-second/kept/", "deletion-policy": {"mode": "hard"}}
    assert client.post(f"{M}/warehouses", json=body).status_code == 201
    assert client.post(f"{M}/warehouses/kept/protections", json={"type": "warehouse"}).status_code == 204
    assert client.get(f"{M}/warehouses/kept").json()["protected"] is True
    refused = client.delete(f"{M}/warehouses/kept")
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "ProtectedException"
    assert client.post(f"{M}/warehouses/kept/protections/remove", json={"type": "warehouse"}).status_code == 204
    assert client.delete(f"{M}/warehouses/kept").status_code == 204


@pytest.fixture
def refusing_deletes(app, db):
    db.execute("UPDATE warehouse SET refuse_deletes = true WHERE name = 'test'")
    services_of(app.app).namespaces.warehouses.invalidate()
    yield
    db.execute("UPDATE warehouse SET refuse_deletes = false WHERE name = 'test'")
    services_of(app.app).namespaces.warehouses.invalidate()


def test_a_warehouse_refusing_deletes_signs_none_and_vends_no_delete(client, catalog, refusing_deletes, settings):
    loaded = client.get(table_url("t", "db%1Fin"), headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert loaded.status_code == 200, loaded.text
    location = Location.parse(loaded.json()["metadata"]["location"])
    http = f"{settings.s3.endpoint}/{location.bucket}/{location.key}/data/x.parquet"

    def sign(method: str, uri: str) -> Any:
        request = {"method": method, "uri": uri, "region": "us-east-1", "headers": {}}
        return client.post(f"{table_url('t', 'db%1Fin')}/sign", json=request)

    refused = sign("DELETE", http)
    assert refused.status_code == 403 and "refuses to sign deletes" in refused.json()["error"]["message"]
    assert sign("POST", f"{settings.s3.endpoint}/{location.bucket}?delete").status_code == 403
    assert sign("PUT", http).status_code == 200
    assert sign("DELETE", http + "?uploadId=1").status_code == 200  # aborting an upload deletes nothing

    credentials = loaded.json().get("storage-credentials")
    assert bool(credentials) == (settings.storage_credentials_mode == "sts")
    if credentials:  # the suite's warehouse vends STS credentials: a real delete is refused by the store
        config = credentials[0]["config"]
        s3 = minio.Minio(
            urlparse(settings.s3.endpoint).netloc,
            access_key=config["s3.access-key-id"],
            secret_key=config["s3.secret-access-key"],
            session_token=config["s3.session-token"],
            secure=False,
            region="us-east-1",
        )
        key = f"{location.key}/data/y.parquet"
        s3.put_object(TEST_BUCKET, key, io.BytesIO(b"1"), 1)
        with pytest.raises(S3Error) as denied:
            s3.remove_object(TEST_BUCKET, key)
        assert denied.value.code == "AccessDenied"
    policy = session_policy(f"s3://{TEST_BUCKET}/t", write=True, delete=False)
    assert "s3:DeleteObject" not in policy["Statement"][0]["Action"]
    assert "s3:PutObject" in policy["Statement"][0]["Action"]
