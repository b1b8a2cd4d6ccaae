"""Crafted locations never touch what a table does not own (issues 13 and 33).

A victim table (with a data object) in a namespace of its own, a victim object in another bucket
and a local file on the catalog host are recorded byte for byte; then an attacker in namespace
``db`` creates, commits, registers, renames, drops and purges with crafted ``location``,
``write.metadata.path`` and metadata-log values. Every placement at, inside or above the
victim's folder (or its namespace's) is refused with nothing written (storage/placement.py);
after every attempt - and after every purge it queued has run - each victim is unchanged.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.composition.services import services_of
from app.housekeeping import Housekeeper
from storage.idempotency import IdempotencyRepository
from storage.objects import S3ObjectStore
from tests.api.tables_support import PREFIX, TextStore, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

# These attacks are on what a hard drop frees and purges at once (a dropped table's location registered
# again, a purge run now): under the default soft policy a dropped table keeps its location and its purge
# waits (issue 35; the soft purge's own attacks are in tests/api/test_recycle_bin.py).
pytestmark = pytest.mark.usefixtures("hard_policy")

OTHER_BUCKET = "growler-test-other"
WH = f"s3://{TEST_BUCKET}"


class Victims:
    """Every object the attacker must not touch, and its bytes."""

    def __init__(self, s3: TextStore, local: Path, prefixes: list[str]) -> None:
        self.s3, self.local, self.prefixes = s3, local, prefixes
        self.before = self.snapshot()
        assert len(self.before) >= 5, self.before.keys()

    def snapshot(self) -> dict[str, bytes]:
        found = {location: self.s3.read(location) for prefix in self.prefixes for location in self.s3.list(prefix)}
        found[str(self.local)] = self.local.read_bytes()
        return found

    def assert_unchanged(self) -> None:
        """Each victim object is still there with the same bytes (an attacker's own files that a
        purge had to leave inside the victim's folder may be there too)."""
        now = self.snapshot()
        assert {location: now.get(location) for location in self.before} == self.before


@pytest.fixture
def s3(app) -> TextStore:
    return TextStore(services_of(app.app).namespaces.objects)


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def victims(client, ns, s3, settings, tmp_path, unique) -> Victims:
    S3ObjectStore(settings.s3).ensure_bucket(OTHER_BUCKET)
    base = f"{WH}/{unique}"
    made = client.post(f"{PREFIX}/namespaces", json={"namespace": ["vns"], "properties": {"location": base}})
    assert made.status_code == 200, made.text
    victim = client.post(tables_url("vns"), json=create_request("victim", location=f"{base}/victim")).json()
    s3.write_new(f"{base}/victim/data/part-0.parquet", b"victim data")
    committed = client.post(
        table_url("victim", "vns"),
        json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"owner": "victim"}}]},
    )
    s3.write_new(f"s3://{OTHER_BUCKET}/{unique}/secret.txt", b"another bucket's object")
    local = tmp_path / "host-file.txt"
    local.write_bytes(b"a file on the catalog host")
    found = Victims(s3, local, [f"{base}/victim", f"s3://{OTHER_BUCKET}/{unique}"])
    found.base = base  # type: ignore[attr-defined]
    found.metadata_location = committed.json()["metadata-location"]  # type: ignore[attr-defined]
    found.first_location = victim["metadata-location"]  # type: ignore[attr-defined]
    return found


def commit(client, name: str, updates: list[dict[str, Any]]):
    return client.post(table_url(name), json={"requirements": [], "updates": updates})


def run_purges(app, db) -> None:
    """Every queued purge has run (by us or by the app's own housekeeping thread)."""
    tables = services_of(app.app).tables
    keeper = Housekeeper(
        tables.repository, tables.objects, IdempotencyRepository(tables.repository.db), threading.Event()
    )
    deadline = time.monotonic() + 30
    while True:
        keeper.run_round(3600)
        if db.execute("SELECT count(*) FROM purge_job").fetchone()[0] == 0:
            return
        assert time.monotonic() < deadline, "purge jobs did not finish"
        time.sleep(0.05)  # a job leased by the app's thread: poll until it is done


def drop_purge(client, name: str) -> None:
    assert client.delete(table_url(name), params={"purgeRequested": "true"}).status_code == 204


def refused(response) -> None:
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "BadRequestException"


@pytest.mark.parametrize("suffix", ["#", "?", "?x", "#/../x"])
def test_metadata_path_naming_the_victims_file_is_refused(client, victims, app, db, suffix):
    path = victims.first_location + suffix
    refused(client.post(tables_url(), json=create_request("evil", properties={"write.metadata.path": path})))
    refused(client.post(tables_url(), json=create_request("evil", location=victims.first_location + suffix)))
    assert client.head(table_url("evil")).status_code == 404
    victims.assert_unchanged()


@pytest.mark.parametrize(
    "crafted",
    [
        "{base}/victim?",
        "{base}/vic?x",
        "{base}//victim",
        "{base}/./victim",
        "{base}/x/../victim",
        "{base}/victim\\data",
        "{base}/%76ictim",
    ],
)
def test_crafted_locations_are_refused_everywhere(client, victims, crafted):
    location = crafted.format(base=victims.base)
    refused(client.post(tables_url(), json=create_request("evil", location=location)))
    client.post(tables_url(), json=create_request("mover"))
    refused(commit(client, "mover", [{"action": "set-location", "location": location}]))
    refused(commit(client, "mover", [{"action": "set-properties", "updates": {"write.metadata.path": location}}]))
    victims.assert_unchanged()


@pytest.mark.parametrize("relative", ["vic", "victim/data", "victim", "victim/metadata", "victi", ""])
def test_a_table_at_beside_inside_or_above_the_victim_is_refused(client, victims, db, relative):
    """At the victim's location, inside it, above it, or beside it in its namespace's folder:
    created, registered or staged there, refused with nothing written."""
    location = f"{victims.base}/{relative}".rstrip("/")
    before = db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0]
    refused(client.post(tables_url(), json=create_request("evil", location=location)))
    refused(client.post(tables_url(), json={**create_request("evil", location=location), "stage-create": True}))
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == before
    assert db.execute("SELECT count(*) FROM staged_table").fetchone()[0] == 0
    victims.assert_unchanged()


def test_a_namespace_pointed_at_the_victim_is_refused(client, victims, db):
    """The attacker's own namespace, its location property set onto the victim's folder (or its
    namespace's, or inside it), or a child of it created there: refused with nothing written
    (issue 46), so what it creates lands in its own folder."""
    for target in (f"{victims.base}/victim", victims.base, f"{victims.base}/victim/data"):
        refused(client.post(f"{PREFIX}/namespaces/db/properties", json={"updates": {"location": target}}))
        child = {"namespace": ["db", "child"], "properties": {"location": target}}
        refused(client.post(f"{PREFIX}/namespaces", json=child))
    assert db.execute("SELECT properties FROM namespace WHERE path = '{db}'").fetchone()[0] == {}
    assert db.execute("SELECT count(*) FROM namespace WHERE path = '{db,child}'").fetchone()[0] == 0
    made = client.post(tables_url(), json=create_request("evil"))
    assert made.status_code == 200, made.text
    assert made.json()["metadata"]["location"].startswith(f"{WH}/db/evil-")
    victims.assert_unchanged()


def test_a_table_moved_onto_the_victim_is_refused(client, victims, db, settings):
    assert client.post(tables_url(), json=create_request("mover")).status_code == 200
    before = client.get(table_url("mover")).json()
    for target in (f"{victims.base}/victim", f"{victims.base}/victim/x", victims.base):
        refused(commit(client, "mover", [{"action": "set-location", "location": target}]))
        refused(commit(client, "mover", [{"action": "set-properties", "updates": {"write.metadata.path": target}}]))
    assert client.get(table_url("mover")).json()["metadata-location"] == before["metadata-location"]
    # and the attacker's table signs nothing of the victim's: read, list, write, delete
    victim_file = f"{victims.base}/victim/data/part-0.parquet".removeprefix("s3://")
    endpoint = settings.s3.endpoint
    bucket, prefix = victims.base.removeprefix("s3://").split("/", 1)
    for method, uri in (
        ("GET", f"{endpoint}/{victim_file}"),
        ("GET", f"{endpoint}/{bucket}?list-type=2&prefix={prefix}/victim/"),
        ("PUT", f"{endpoint}/{victim_file}"),
        ("DELETE", f"{endpoint}/{victim_file}"),
    ):
        request = {"method": method, "uri": uri, "region": "us-east-1", "headers": {}}
        assert client.post(f"{table_url('mover')}/sign", json=request).status_code == 403
    victims.assert_unchanged()


def test_two_concurrent_creates_at_one_location_one_wins(client, ns, db):
    """Raced through a barrier: exactly one of two creates placing a table at the same location
    (each in its own request, its own transaction) wins; the other is refused."""
    location = f"{WH}/db/contested-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(2)

    def create(name: str) -> int:
        start.wait(timeout=10)
        return client.post(tables_url(), json=create_request(name, location=location)).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        statuses = sorted(pool.map(create, ["one", "two"]))
    assert statuses == [200, 400]
    assert db.execute("SELECT count(*) FROM catalog_entry WHERE location = %s", (location,)).fetchone()[0] == 1


def registered_metadata(client, s3, victims, name: str, **changes: Any) -> str:
    """A metadata file (written in the attacker's own folder) made from a real one, then changed."""
    body = client.post(tables_url(), json=create_request(name)).json()
    assert client.delete(table_url(name)).status_code == 204
    metadata = body["metadata"] | changes
    location = f"{WH}/db/attacker-{uuid.uuid4().hex[:8]}/metadata/00005-{uuid.uuid4()}.metadata.json"
    s3.write_new(location, json.dumps(metadata).encode())
    return location


def log_naming(*files: str) -> list[dict[str, Any]]:
    return [{"timestamp-ms": 1_700_000_000_000 + i, "metadata-file": file} for i, file in enumerate(files)]


def test_register_with_a_metadata_log_outside_the_warehouse_is_refused(client, victims, s3, db, app):
    outside = [f"file://{victims.local}", f"s3://{OTHER_BUCKET}/{victims.base.rsplit('/', 1)[1]}/secret.txt"]
    for file in outside:
        location = registered_metadata(client, s3, victims, "model", **{"metadata-log": log_naming(file)})
        refused(client.post(f"{PREFIX}/namespaces/db/register", json={"name": "evil", "metadata-location": location}))
        assert client.head(table_url("evil")).status_code == 404
    for changes in (
        {"location": f"s3://{OTHER_BUCKET}/t"},
        {"properties": {"write.metadata.path": f"s3://{OTHER_BUCKET}/m"}},
        {"location": f"{victims.base}/vic?x"},
    ):
        location = registered_metadata(client, s3, victims, "model", **changes)
        refused(client.post(f"{PREFIX}/namespaces/db/register", json={"name": "evil", "metadata-location": location}))
    assert db.execute("SELECT count(*) FROM catalog_entry WHERE name = 'evil'").fetchone()[0] == 0
    victims.assert_unchanged()


@pytest.mark.parametrize("shared_location", [False, True])
def test_delete_after_commit_never_deletes_the_victims_files(client, victims, s3, app, db, shared_location):
    """Registered metadata whose log names the victim's files (inside the warehouse, so allowed),
    then commits with delete-after-commit and previous-versions-max=1, then a purge."""
    victim_files = [victims.first_location, victims.metadata_location]
    changes: dict[str, Any] = {"metadata-log": log_naming(*victim_files)}
    if shared_location:
        changes["location"] = f"{victims.base}/victim"
    location = registered_metadata(client, s3, victims, "model", **changes)
    response = client.post(f"{PREFIX}/namespaces/db/register", json={"name": "evil", "metadata-location": location})
    if shared_location:  # the victim's location is the victim's: refused, nothing registered
        refused(response)
        victims.assert_unchanged()
        return
    assert response.status_code == 200, response.text
    for i in range(3):
        response = commit(
            client,
            "evil",
            [
                {
                    "action": "set-properties",
                    "updates": {
                        "write.metadata.delete-after-commit.enabled": "true",
                        "write.metadata.previous-versions-max": "1",
                        "round": str(i),
                    },
                }
            ],
        )
        assert response.status_code == 200, response.text
    assert [e["metadata-file"] for e in response.json()["metadata"]["metadata-log"]][-1:] != victim_files[-1:]
    victims.assert_unchanged()
    drop_purge(client, "evil")
    run_purges(app, db)
    victims.assert_unchanged()


def test_a_registered_copy_of_the_victim_is_refused(client, victims, db):
    for namespace in ("db", "vns"):  # in the attacker's namespace, or beside the victim in its own
        response = client.post(
            f"{PREFIX}/namespaces/{namespace}/register",
            json={"name": "copy", "metadata-location": victims.metadata_location},
        )
        refused(response)
    assert db.execute("SELECT count(*) FROM catalog_entry WHERE name = 'copy'").fetchone()[0] == 0
    victims.assert_unchanged()
    assert client.head(table_url("victim", "vns")).status_code == 204


def test_a_failed_write_deletes_only_what_it_created(client, victims, app, db, monkeypatch):
    """The conditional PUT of a new table's first file meets the victim's file (same name): the
    refusal's cleanup must not delete it."""
    victim_dir, victim_file = victims.first_location.rsplit("/", 1)
    taken = uuid.UUID(victim_file.removeprefix("00000-").removesuffix(".metadata.json"))
    real_uuid4 = uuid.uuid4
    monkeypatch.setattr("app.tables.committing.uuid.uuid4", lambda: taken)
    response = client.post(tables_url(), json=create_request("evil", properties={"write.metadata.path": victim_dir}))
    monkeypatch.setattr("app.tables.committing.uuid.uuid4", real_uuid4)
    assert response.status_code in (400, 409), response.text  # the victim's folder, or its file's name: taken
    assert client.head(table_url("evil")).status_code == 404
    pending = db.execute("SELECT count(*) FROM pending_object WHERE starts_with(location, %s)", (victim_dir,))
    assert pending.fetchone()[0] == 0
    victims.assert_unchanged()
    assert client.head(table_url("victim", "vns")).status_code == 204
