"""Per-warehouse allowed locations (issue 19): extra prefixes where tables and views may be
created, moved, registered and keep their metadata; everything else is 400 with nothing written.
Local-file locations work end to end with the local object store."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from app.composition.services import services_of
from app.ground.settings import Settings
from app.housekeeping import Housekeeper
from storage.idempotency import IdempotencyRepository
from storage.objects import S3ObjectStore
from tests.api.tables_support import PREFIX, TextStore, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

OTHER_BUCKET = "growler-test-other"


@pytest.fixture
def s3(app) -> TextStore:
    return TextStore(services_of(app.app).namespaces.objects)


@pytest.fixture
def allowed(app, client, settings, tmp_path, unique):
    """The test warehouse with one allowed prefix in another bucket and one on the local disk."""
    S3ObjectStore(settings.s3).ensure_bucket(OTHER_BUCKET)
    catalog = services_of(app.app).namespaces
    s3_root = f"s3://{OTHER_BUCKET}/{unique}/allowed"
    local_root = tmp_path / "allowed"
    catalog.warehouses.remember(
        catalog.repository.upsert_warehouse(
            settings.warehouse,
            settings.warehouse_location,
            {"endpoint": settings.s3.endpoint, "region": "us-east-1", "path-style": True},
            [s3_root + "/", f"file:{local_root}"],
        )
    )
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    yield {"s3": s3_root, "local": local_root, "other": f"s3://{OTHER_BUCKET}/{unique}"}
    catalog.ensure_default_warehouse()


def refused_with_nothing_written(response, s3, db, before: set[str]) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "BadRequestException"
    assert "allowed locations" in response.json()["error"]["message"]
    assert set(s3.list(f"s3://{OTHER_BUCKET}/")) == before
    pending = db.execute(
        "SELECT count(*) FROM pending_object WHERE starts_with(location, %s) OR location LIKE 'file:%%'",
        (f"s3://{OTHER_BUCKET}/",),
    )
    assert pending.fetchone()[0] == 0


def files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def test_create_inside_an_allowed_prefix(client, allowed, s3):
    response = client.post(tables_url(), json=create_request("there", location=f"{allowed['s3']}/t"))
    assert response.status_code == 200, response.text
    metadata_location = response.json()["metadata-location"]
    assert metadata_location.startswith(f"{allowed['s3']}/t/metadata/")
    assert s3.exists(metadata_location)
    view = client.post(
        f"{PREFIX}/namespaces/db/views",
        json={
            "name": "v",
            "location": f"{allowed['s3']}/v",
            "schema": create_request("x")["schema"],
            "view-version": {
                "version-id": 1,
                "timestamp-ms": 1,
                "schema-id": 0,
                "summary": {},
                "default-namespace": ["db"],
                "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
            },
            "properties": {},
        },
    )
    assert view.status_code == 200, view.text
    assert view.json()["metadata-location"].startswith(f"{allowed['s3']}/v/metadata/")


@pytest.mark.parametrize(
    "outside",
    [
        "{other}/allowedx/t",
        "{other}/t",
        "{other}/allowed",
        "s3://growler-other/t",
        "file:/tmp/growler-not-allowed-{uuid}/t",
    ],
)
def test_outside_every_allowed_prefix_is_refused(client, allowed, s3, db, outside):
    location = outside.format(other=allowed["other"], uuid=uuid.uuid4().hex)
    before = set(s3.list(f"s3://{OTHER_BUCKET}/"))
    refused_with_nothing_written(client.post(tables_url(), json=create_request("t", location=location)), s3, db, before)
    refused_with_nothing_written(
        client.post(tables_url(), json=create_request("t", properties={"write.metadata.path": location})),
        s3,
        db,
        before,
    )
    assert client.post(tables_url(), json=create_request("mover")).status_code == 200
    for updates in (
        [{"action": "set-location", "location": location}],
        [{"action": "set-properties", "updates": {"write.metadata.path": location}}],
    ):
        response = client.post(table_url("mover"), json={"requirements": [], "updates": updates})
        refused_with_nothing_written(response, s3, db, before)
    assert not Path(location.removeprefix("file:")).exists()
    assert client.head(table_url("t")).status_code == 404


def test_set_location_and_metadata_path_into_an_allowed_prefix(client, allowed, s3):
    assert client.post(tables_url(), json=create_request("mover")).status_code == 200
    moved = client.post(
        table_url("mover"),
        json={"requirements": [], "updates": [{"action": "set-location", "location": f"{allowed['s3']}/moved"}]},
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["metadata-location"].startswith(f"{allowed['s3']}/moved/metadata/")
    assert s3.exists(moved.json()["metadata-location"])
    pathed = client.post(
        table_url("mover"),
        json={
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"write.metadata.path": f"{allowed['s3']}/meta"}}],
        },
    )
    assert pathed.status_code == 200, pathed.text
    assert pathed.json()["metadata-location"].startswith(f"{allowed['s3']}/meta/")
    assert s3.exists(pathed.json()["metadata-location"])


def test_register_inside_and_outside(client, allowed, s3, db):
    made = client.post(tables_url(), json=create_request("model")).json()
    assert client.delete(table_url("model")).status_code == 204
    inside = f"{allowed['s3']}/reg/metadata/00003-{uuid.uuid4()}.metadata.json"
    s3.write_new(inside, json.dumps(made["metadata"] | {"location": f"{allowed['s3']}/reg"}).encode())
    response = client.post(f"{PREFIX}/namespaces/db/register", json={"name": "reg", "metadata-location": inside})
    assert response.status_code == 200, response.text
    assert response.json()["metadata-location"] == inside
    assert client.head(table_url("reg")).status_code == 204

    outside = f"{allowed['other']}/elsewhere/metadata/00003-{uuid.uuid4()}.metadata.json"
    s3.write_new(outside, json.dumps(made["metadata"] | {"location": f"{allowed['other']}/elsewhere"}).encode())
    before = set(s3.list(f"s3://{OTHER_BUCKET}/"))
    response = client.post(f"{PREFIX}/namespaces/db/register", json={"name": "out", "metadata-location": outside})
    refused_with_nothing_written(response, s3, db, before)
    # a file inside an allowed prefix naming a table location outside them: refused too
    moved_out = f"{allowed['s3']}/reg2/metadata/00003-{uuid.uuid4()}.metadata.json"
    s3.write_new(moved_out, json.dumps(made["metadata"] | {"location": f"s3://{TEST_BUCKET}-x/t"}).encode())
    response = client.post(f"{PREFIX}/namespaces/db/register", json={"name": "out", "metadata-location": moved_out})
    assert response.status_code == 400, response.text
    assert client.head(table_url("out")).status_code == 404


def test_a_local_file_table_end_to_end(client, allowed, app, db, hard_policy):
    """Created, committed, loaded, dropped with purge: the files are on the local disk."""
    root: Path = allowed["local"]
    location = f"file:{root}/local-table"
    created = client.post(tables_url(), json=create_request("local", location=location))
    assert created.status_code == 200, created.text
    first = created.json()["metadata-location"]
    committed = client.post(
        table_url("local"), json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    )
    assert committed.status_code == 200, committed.text
    second = committed.json()["metadata-location"]
    assert first.startswith(f"{location}/metadata/") and second.startswith(f"{location}/metadata/")
    assert files(root) == sorted(Path(path.removeprefix("file:")) for path in (first, second))
    assert json.loads(Path(second.removeprefix("file:")).read_text())["properties"] == {"a": "1"}
    assert committed.json()["metadata"]["properties"] == {"a": "1"}
    neighbour = root / "not-a-table.txt"
    neighbour.write_text("left alone")
    assert client.delete(table_url("local"), params={"purgeRequested": "true"}).status_code == 204
    tables = services_of(app.app).tables
    keeper = Housekeeper(
        tables.repository, tables.objects, IdempotencyRepository(tables.repository.db), threading.Event()
    )
    deadline = time.monotonic() + 60  # a hang guard: a purge that fails is put off a minute
    # this table's purge only: the queue is not emptied between tests, and another test's purge may
    # be leased to another keeper
    own = "SELECT location, attempts, last_error FROM purge_job WHERE starts_with(location, %s)"
    while jobs := db.execute(own, (location,)).fetchall():
        keeper.run_round(3600)
        assert time.monotonic() < deadline, jobs
    assert files(root) == [neighbour]


def test_allowed_locations_from_the_environment():
    env = {
        "GROWLER_DATABASE_URL": "postgresql://x",
        "GROWLER_S3_ENDPOINT": "http://127.0.0.1:1",
        "GROWLER_ALLOWED_LOCATIONS": " s3://other-bucket/path/ , file:/data/tables ",
    }
    assert Settings.from_env(env).allowed_locations == ("s3://other-bucket/path/", "file:/data/tables")
    for bad in ("s3://other-bucket/a?b", "file://host/x", "gs://b/x", "s3://other-bucket/../x"):
        with pytest.raises(ValueError, match="GROWLER_ALLOWED_LOCATIONS"):
            Settings.from_env({**env, "GROWLER_ALLOWED_LOCATIONS": bad})
