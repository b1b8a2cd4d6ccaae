"""Staged tables: storage access serves a table from its stage-create until its create commits.

Spark's CTAS and ``createOrReplace``, PyIceberg's ``create_table_transaction`` and Trino's CTAS
stage a table, write its files, then commit the create. These tests stage through the API, have
requests signed (and credentials vended) for the staged location, send the signed requests to
SeaweedFS, and check every way a stage ends and every refusal, with the store and the catalog
unchanged by a refusal.
"""

from __future__ import annotations

import httpx
import pytest

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.api.authz_support import PREFIX, WAREHOUSE, catalog_state
from tests.api.tables_support import create_request

pytestmark = pytest.mark.usefixtures("clean_catalog")

SIGNING = {"X-Iceberg-Access-Delegation": "remote-signing"}
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}


@pytest.fixture
def store(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


def stage(client, name: str, namespace: str = "ns", headers: dict | None = None, **extra):
    request = {**create_request(name), "stage-create": True, **extra}
    return client.post(f"{PREFIX}/namespaces/{namespace}/tables", json=request, headers=headers or SIGNING)


def sign(client, name: str, method: str, uri: str, namespace: str = "ns"):
    body = {"method": method, "uri": uri, "region": "us-east-1", "headers": {}}
    return client.post(f"{PREFIX}/namespaces/{namespace}/tables/{name}/sign", json=body)


def object_url(settings, location: str) -> str:
    parsed = Location.parse(location)
    return f"{settings.s3.endpoint}/{parsed.bucket}/{parsed.key}"


def put_signed(client, settings, name: str, location: str, payload: bytes) -> httpx.Response:
    """Sign a PUT of ``location`` for table ``name`` and send it to the store."""
    signed = sign(client, name, "PUT", object_url(settings, location))
    assert signed.status_code == 200, signed.text
    headers = {header: ", ".join(values) for header, values in signed.json()["headers"].items()}
    return httpx.put(signed.json()["uri"], headers=headers, content=payload, timeout=10)


def stages(db) -> list[tuple]:
    return db.execute("SELECT name, location FROM staged_table ORDER BY id").fetchall()


def test_a_staged_table_is_signed_for_until_its_create_commits(client, settings, store, db):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    staged = stage(client, "ctas")
    assert staged.status_code == 200, staged.text
    location = staged.json()["metadata"]["location"]
    assert stages(db) == [("ctas", location)]

    data_file = f"{location}/data/part-0.parquet"
    assert put_signed(client, settings, "ctas", data_file, b"rows").status_code == 200
    assert store.read(Location.parse(data_file), 100) == b"rows"
    # outside the staged location: refused, nothing signed
    assert sign(client, "ctas", "PUT", object_url(settings, f"{location}-other/x")).status_code == 403

    # the create commits (as Java's create transaction does): the stage ends, the row takes over
    commit = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": staged.json()["metadata"]["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": staged.json()["metadata"]["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "set-location", "location": location},
        ],
    }
    committed = client.post(f"{PREFIX}/namespaces/ns/tables/ctas", json=commit)
    assert committed.status_code == 200, committed.text
    assert stages(db) == []
    assert put_signed(client, settings, "ctas", f"{location}/data/part-1.parquet", b"more").status_code == 200


def test_staged_credentials_are_vended_and_refreshed_for_the_staged_location(client, db):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    staged = stage(client, "sts", headers=VENDED)
    assert staged.status_code == 200, staged.text
    location = staged.json()["metadata"]["location"]
    (credential,) = staged.json()["storage-credentials"]
    assert credential["prefix"] == location
    config = staged.json()["config"]
    assert config["client.refresh-credentials-endpoint"] == f"v1/{WAREHOUSE}/namespaces/ns/tables/sts/credentials"
    assert int(config["s3.session-token-expires-at-ms"]) > 0

    refreshed = client.get(f"{PREFIX}/namespaces/ns/tables/sts/credentials")
    assert refreshed.status_code == 200, refreshed.text
    (fresh,) = refreshed.json()["storage-credentials"]
    assert fresh["prefix"] == location
    assert fresh["config"]["s3.access-key-id"] != credential["config"]["s3.access-key-id"]
    # no table and no stage under another name: the table's 404
    assert client.get(f"{PREFIX}/namespaces/ns/tables/other/credentials").status_code == 404


def test_an_expired_stage_is_refused_and_forgotten(client, settings, app, db):
    from app.composition.services import services_of

    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    location = stage(client, "old").json()["metadata"]["location"]
    db.execute("UPDATE staged_table SET expires_at = now() - interval '1 second'")
    refused = sign(client, "old", "PUT", object_url(settings, f"{location}/data/late.parquet"))
    assert refused.status_code == 403
    assert client.get(f"{PREFIX}/namespaces/ns/tables/old/credentials").status_code == 404
    # the app's own housekeeping thread may have forgotten it first (it runs every few seconds):
    # one of the two deleted it, and it is gone
    assert services_of(app.app).tables.staged.delete_expired() in (0, 1)
    assert stages(db) == []


def test_a_stage_overlapping_a_live_table_is_refused_with_nothing_written(client, db):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    live = client.post(f"{PREFIX}/namespaces/ns/tables", json=create_request("live"))
    assert live.status_code == 200
    victim = live.json()["metadata"]["location"]
    before = catalog_state(db), stages(db)
    for location in (victim, f"{victim}/data", victim.rsplit("/", 1)[0]):
        refused = stage(client, "thief", location=location)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["type"] == "BadRequestException"
        assert (catalog_state(db), stages(db)) == before
    # nor may a second stage claim a first one's folder
    first = stage(client, "first").json()["metadata"]["location"]
    assert stage(client, "second", location=f"{first}/nested").status_code == 400
    assert [name for name, _ in stages(db)] == ["first"]


def test_another_create_of_the_name_ends_the_stage(client, settings, db):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    location = stage(client, "raced").json()["metadata"]["location"]
    assert client.post(f"{PREFIX}/namespaces/ns/tables", json=create_request("raced")).status_code == 200
    assert stages(db) == []
    assert sign(client, "raced", "PUT", object_url(settings, f"{location}/data/x.parquet")).status_code == 403


def test_dropping_the_namespace_drops_its_stages(client, db):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["gone"]}).status_code == 200
    assert stage(client, "t", namespace="gone").status_code == 200
    assert client.delete(f"{PREFIX}/namespaces/gone").status_code == 204
    assert stages(db) == []


def test_only_a_caller_with_create_stages_or_signs_for_a_stage(client, principals, settings, store, db):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    reader = principals.new("reader")
    principals.grant(reader, "read", "namespace", WAREHOUSE, ("ns",))
    before = catalog_state(db), stages(db)
    assert stage(reader.client, "nope").status_code == 403
    assert (catalog_state(db), stages(db)) == before

    creator = principals.new("creator")
    principals.grant(creator, "create", "namespace", WAREHOUSE, ("ns",))
    staged = stage(creator.client, "mine")
    assert staged.status_code == 200, staged.text
    location = staged.json()["metadata"]["location"]
    data_file = f"{location}/data/part-0.parquet"
    assert put_signed(creator.client, settings, "mine", data_file, b"x").status_code == 200
    # reading a staged table's files needs its stager's privilege, not READ on the namespace
    refused = sign(reader.client, "mine", "GET", object_url(settings, data_file))
    assert refused.status_code == 403
    assert sign(reader.client, "mine", "PUT", object_url(settings, f"{location}/data/evil")).status_code == 403
    assert reader.client.get(f"{PREFIX}/namespaces/ns/tables/mine/credentials").status_code == 404
    # CREATE does not reach a committed table's files: that needs READ on it
    live = client.post(f"{PREFIX}/namespaces/ns/tables", json=create_request("live")).json()["metadata"]["location"]
    assert sign(creator.client, "live", "GET", object_url(settings, f"{live}/metadata/x")).status_code == 403
    assert creator.client.get(f"{PREFIX}/namespaces/ns/tables/live/credentials").status_code == 403
    assert store.read(Location.parse(data_file), 10) == b"x"


def test_a_staged_create_may_add_its_spec_and_order_before_setting_its_schema(client):
    """DuckDB's order of updates: the spec and sort order are checked against the schema the
    same commit added, which becomes current only at its end."""
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    staged = stage(client, "duck").json()["metadata"]
    schema = staged["schemas"][0]
    field = schema["fields"][0]
    spec = {
        "spec-id": 0,
        "fields": [{"source-id": field["id"], "field-id": 1000, "name": "p", "transform": "identity"}],
    }
    order = {
        "order-id": 1,
        "fields": [
            {"source-id": field["id"], "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
        ],
    }
    commit = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": staged["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": schema},
            {"action": "add-spec", "spec": spec},
            {"action": "add-sort-order", "sort-order": order},
            {"action": "set-location", "location": staged["location"]},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    }
    created = client.post(f"{PREFIX}/namespaces/ns/tables/duck", json=commit)
    assert created.status_code == 200, created.text
    metadata = created.json()["metadata"]
    assert [f["name"] for f in metadata["partition-specs"][-1]["fields"]] == ["p"]
    assert metadata["default-sort-order-id"] == 1
    assert metadata["current-schema-id"] == schema["schema-id"]
