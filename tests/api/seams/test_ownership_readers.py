"""Where table ownership meets the server-side readers (issue 46): the console's data preview, scan
planning (planTableScan, fetchPlanningResult) and maintenance read a table's files with Growler's
own keys, which reach every table of the warehouse and beyond; ownership (storage/placement.py:
each table owns its location, metadata directory and data path, ``table_roots``) is what says
which of those files are the table's. The shared state is the object store: one table's snapshot
can name files another table owns, and the readers must open and hand out only the caller's
table's own.

The attack is built for real: table ``b.victim`` holds rows written by PyIceberg (through the
test client: the in-process app has no URL), and principal A, with write on its own table
``a.mine`` only, commits snapshots naming B's manifest list, B's manifests (in a manifest list
A wrote), B's data files (in a manifest A wrote) or a data file in a bucket no warehouse uses.
The first is refused at the commit (and B's metadata copied elsewhere cannot be registered); the
others are accepted (a commit does not read manifests), and then every reader refuses, showing
none of B's rows and listing none of its files, and maintenance fails its run with the reason,
changing nothing. Two pages of the preview for a
table that cannot be read (its manifest list missing, Parquet files without field ids) are
clear pages, not a JSON 500. A table's own ``write.data.path`` outside its location is read like
its location; the same files named by another table are refused.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO, _dataframe_to_data_files, parquet_file_to_data_file
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest, write_manifest_list
from pyiceberg.table import CommitTableRequest, CommitTableResponse, Table, TableIdentifier
from pyiceberg.table.metadata import TableMetadataUtil

from app.composition.services import services_of
from app.ground.locations import Location
from storage.management_rows import Securable
from storage.objects import S3ObjectStore
from tests.api.authz_support import MANAGEMENT, PREFIX
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, fetch_token

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "secret", "type": "string", "required": False},
    ],
}
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("secret", pa.string())])
VICTIM_ROWS = [{"id": 1, "secret": "victim-secret-1"}, {"id": 2, "secret": "victim-secret-2"}]
MY_ROWS = [{"id": 10, "secret": "mine-10"}]
STRANGER_ROWS = [{"id": 99, "secret": "stranger-secret-99"}]
DAY_MS = 86_400_000
POLICIES = (
    "system.snapshot-expiry",
    "system.orphan-file-removal",
    "system.metadata-compaction",
    "system.data-compaction",
)


def table_url(namespace: str, name: str) -> str:
    return f"{PREFIX}/namespaces/{namespace}/tables/{name}"


class ClientCatalog(NoopCatalog):
    """PyIceberg's commits sent through a test client, as its REST catalog sends them."""

    def __init__(self, client: Any, file_io: PyArrowFileIO) -> None:
        super().__init__("growler")
        self.client = client
        self.file_io = file_io

    def load(self, namespace: str, name: str) -> Table:
        response = self.client.get(table_url(namespace, name))
        assert response.status_code == 200, response.text
        body = response.json()
        metadata = TableMetadataUtil.parse_obj(body["metadata"])
        return Table((namespace, name), metadata, body["metadata-location"], self.file_io, self)

    def commit_table(self, table: Table, requirements: tuple, updates: tuple) -> CommitTableResponse:
        namespace, name = table.name()
        request = CommitTableRequest(
            identifier=TableIdentifier(namespace=[namespace], name=name), requirements=requirements, updates=updates
        )
        response = self.client.post(
            table_url(namespace, name),
            content=request.model_dump_json().encode(),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 200, response.text
        return CommitTableResponse.model_validate_json(response.text)


@pytest.fixture
def file_io(settings) -> PyArrowFileIO:
    """What a writer of the warehouse's files uses (the suite's storage keys)."""
    s3 = settings.s3
    return PyArrowFileIO(
        {
            "s3.endpoint": s3.endpoint,
            "s3.access-key-id": s3.access_key,
            "s3.secret-access-key": s3.secret_key,
            "s3.region": s3.region,
            "s3.path-style-access": "true",
        }
    )


@pytest.fixture
def store(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


def sign_in(app, client_id: str, secret: str) -> Any:
    """A browser-like client signed in to the console."""
    browser = app.anonymous_client()
    form = browser.get("/ui/sign-in")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    answer = browser.post(
        "/ui/sign-in",
        data={"csrf": token, "client_id": client_id, "client_secret": secret, "next": "/ui/"},
        follow_redirects=False,
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/", answer.text
    return browser


class Scene:
    """``b.victim`` with PyIceberg's rows; ``a.mine`` with one snapshot of A's own rows; principal
    A with write on ``a.mine`` only, its API client (``api``) and its console session."""

    def __init__(self, app: Any, principals: Any, file_io: PyArrowFileIO) -> None:
        self.admin = app.test_client()
        for namespace in ("a", "b"):
            assert self.admin.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]}).status_code == 200
        for namespace, name in (("a", "mine"), ("b", "victim")):
            body = {"name": name, "schema": SCHEMA, "properties": {"format-version": "2"}}
            response = self.admin.post(f"{PREFIX}/namespaces/{namespace}/tables", json=body)
            assert response.status_code == 200, response.text
        self.io = file_io
        self.catalog = ClientCatalog(self.admin, file_io)
        victim = self.catalog.load("b", "victim")
        victim.append(pa.Table.from_pylist(VICTIM_ROWS, schema=ARROW))
        self.victim = self.catalog.load("b", "victim")
        self.victim_manifests = self.victim.current_snapshot().manifests(file_io)
        self.victim_files = [
            entry.data_file for manifest in self.victim_manifests for entry in manifest.fetch_manifest_entry(file_io)
        ]
        mine = self.catalog.load("a", "mine")
        mine.append(pa.Table.from_pylist(MY_ROWS, schema=ARROW))
        self.first = mine.current_snapshot().snapshot_id
        self.attacker = principals.new("attacker")
        principals.grant(self.attacker, "write", "table", "test", ["a"], "mine")
        secret = principals.admin.post(f"{MANAGEMENT}/principals/{self.attacker.name}/rotate").json()["client-secret"]
        token = fetch_token(app.anonymous_client(), self.attacker.name, secret)  # (the rotation revoked the first)
        self.api = app.anonymous_client(headers={"Authorization": f"Bearer {token}"})
        self.console = sign_in(app, self.attacker.name, secret)

    @property
    def mine(self) -> Table:
        return self.catalog.load("a", "mine")

    def victim_objects(self, store: S3ObjectStore) -> list[str]:
        return sorted(found.uri for found in store.list(Location.parse(self.victim.metadata.location)))

    def victim_texts(self) -> list[str]:
        """What must never appear in an answer to A: B's rows and the paths of its data files."""
        return [row["secret"] for row in VICTIM_ROWS] + [data_file.file_path for data_file in self.victim_files]

    def manifest_list_of(self, manifests: list, snapshot_id: int) -> str:
        """A manifest list written by A, under A's own metadata directory, naming ``manifests``."""
        mine = self.mine
        path = f"{mine.metadata.location}/metadata/snap-{snapshot_id}-1-{uuid.uuid4()}.avro"
        parent = mine.current_snapshot().snapshot_id
        sequence = mine.metadata.last_sequence_number + 1
        with write_manifest_list(2, self.io.new_output(path), snapshot_id, parent, sequence, "null") as writer:
            writer.add_manifests(manifests)
        return path

    def manifest_of(self, data_files: list, snapshot_id: int) -> Any:
        """A manifest written by A, under A's own metadata directory, naming ``data_files``."""
        mine = self.mine
        path = f"{mine.metadata.location}/metadata/{uuid.uuid4()}-m0.avro"
        output = self.io.new_output(path)
        with write_manifest(2, mine.metadata.spec(), mine.metadata.schema(), output, snapshot_id, "null") as writer:
            for data_file in data_files:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=data_file
                    )
                )
        return writer.to_manifest_file()

    def commit_snapshot(self, client: Any, manifest_list: str, snapshot_id: int, **summary: str) -> Any:
        """A commits a snapshot with ``manifest_list`` to main of ``a.mine``."""
        mine = self.mine
        snapshot = {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": mine.current_snapshot().snapshot_id,
            "sequence-number": mine.metadata.last_sequence_number + 1,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": manifest_list,
            "summary": {"operation": "append", **summary},
            "schema-id": 0,
        }
        updates = [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ]
        return client.post(table_url("a", "mine"), json={"requirements": [], "updates": updates})


@pytest.fixture
def scene(app, client, principals, file_io) -> Scene:
    return Scene(app, principals, file_io)


def objects_under(store: S3ObjectStore, location: str) -> list[str]:
    return sorted(found.uri for found in store.list(Location.parse(location)))


def test_a_snapshot_naming_another_tables_manifest_list_is_refused_and_writes_nothing(scene, store, db):
    before = scene.admin.get(table_url("a", "mine")).json()
    objects = objects_under(store, before["metadata"]["location"])
    events = db.execute("SELECT count(*) FROM change_event").fetchone()[0]
    victim_list = scene.victim.current_snapshot().manifest_list

    response = scene.commit_snapshot(scene.api, victim_list, 777)

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "BadRequestException"
    message = error["message"]
    assert victim_list in message and f"outside the table's locations ({before['metadata']['location']})" in message
    assert "write the table's files under its location" in message  # what to do next
    assert scene.admin.get(table_url("a", "mine")).json() == before
    assert objects_under(store, before["metadata"]["location"]) == objects
    assert db.execute("SELECT count(*) FROM change_event").fetchone()[0] == events


def test_registering_metadata_whose_snapshots_are_another_tables_is_refused(scene, store, db):
    """An import is the table's only where its manifest lists are in its own locations: B's
    metadata, copied under namespace ``a`` with a location of its own, is refused (400, nothing
    registered), so it cannot become a table whose reads are B's files."""
    victim = scene.admin.get(table_url("b", "victim")).json()
    location = f"{victim['metadata']['location'].rsplit('/b/', 1)[0]}/a/imported"
    copied = {**victim["metadata"], "location": location, "table-uuid": str(uuid.uuid4())}
    metadata_location = f"{location}/metadata/00001-{uuid.uuid4()}.metadata.json"
    store.write_new(Location.parse(metadata_location), json.dumps(copied).encode())
    entries = db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0]

    body = {"name": "imported", "metadata-location": metadata_location}
    response = scene.admin.post(f"{PREFIX}/namespaces/a/register", json=body)

    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert scene.victim.current_snapshot().manifest_list in message
    assert f"outside the table's locations ({location})" in message
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == entries
    assert scene.admin.get(table_url("a", "imported")).status_code == 404


def _victims_manifests(scene: Scene, store: S3ObjectStore, snapshot_id: int) -> tuple[str, str]:
    """A's own manifest list naming B's manifests: (the list, the foreign path readers refuse)."""
    return scene.manifest_list_of(scene.victim_manifests, snapshot_id), scene.victim_manifests[0].manifest_path


def _victims_data_files(scene: Scene, store: S3ObjectStore, snapshot_id: int) -> tuple[str, str]:
    """A's own manifest naming B's data files, next to A's own manifests in A's manifest list."""
    own = list(scene.mine.current_snapshot().manifests(scene.io))
    manifest = scene.manifest_of(scene.victim_files, snapshot_id)
    return scene.manifest_list_of([*own, manifest], snapshot_id), scene.victim_files[0].file_path


def _stranger_bucket(scene: Scene, store: S3ObjectStore, snapshot_id: int) -> tuple[str, str]:
    """A's own manifest naming a real data file (PyIceberg's, with field ids) in a bucket no
    warehouse uses, next to A's own manifests."""
    bucket = f"growler-stranger-{uuid.uuid4().hex[:8]}"
    store.ensure_bucket(bucket)
    elsewhere = scene.mine.metadata.model_copy(update={"location": f"s3://{bucket}/loot"})
    data_files = list(_dataframe_to_data_files(elsewhere, pa.Table.from_pylist(STRANGER_ROWS, schema=ARROW), scene.io))
    assert data_files[0].file_path.startswith(f"s3://{bucket}/loot/")
    own = list(scene.mine.current_snapshot().manifests(scene.io))
    manifest = scene.manifest_of(data_files, snapshot_id)
    return scene.manifest_list_of([*own, manifest], snapshot_id), data_files[0].file_path


ATTACKS = {
    "victims-manifests": _victims_manifests,
    "victims-data-files": _victims_data_files,
    "a-bucket-no-warehouse-uses": _stranger_bucket,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_reader_opens_or_hands_out_another_tables_files(app, scene, store, attack):
    victim_before = scene.victim_objects(store)
    manifest_list, foreign = ATTACKS[attack](scene, store, 4242)

    # the commit names A's own manifest list: accepted (manifests are not read at commit time)
    committed = scene.commit_snapshot(scene.api, manifest_list, 4242)
    assert committed.status_code == 200, committed.text
    mine_after_commit = scene.admin.get(table_url("a", "mine")).json()
    never_shown = [*scene.victim_texts(), *(row["secret"] for row in STRANGER_ROWS)]

    # the console's preview: a page saying why, nothing of the other table's
    page = scene.console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "mine"})
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
    assert "Cannot preview the table" in page.text and "outside the table" in page.text
    assert foreign in page.text  # the file refused, named
    assert not [text for text in never_shown if text in page.text and text != foreign]
    # ...while A's own earlier snapshot still previews
    own = scene.console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "mine", "snapshot": scene.first})
    assert own.status_code == 200 and "mine-10" in own.text

    # scan planning, at once: a 400 naming the refused file; no task, no file of the other table
    planned = scene.api.post(f"{table_url('a', 'mine')}/plan", json={})
    assert planned.status_code == 400, planned.text
    error = planned.json()["error"]
    assert error["type"] == "BadRequestException" and error["message"].startswith("Cannot plan the scan: ")
    assert foreign in error["message"] and "outside the table's locations" in error["message"]
    assert not [text for text in never_shown if text in planned.text and text != foreign]
    assert "file-scan-tasks" not in planned.text

    # maintenance: every policy type's run fails with the reason, nothing committed or deleted
    maintenance = services_of(app.app).maintenance
    table = maintenance.maintenance.table("test", ("a",), "mine")
    maintenance.maintenance.schedule(table.entry_id, 86_400)  # the schedule stays off: the test runs it
    for policy_type in POLICIES:
        content: dict[str, Any] = {"enable": True}
        if policy_type == "system.snapshot-expiry":
            content["config"] = {"max_snapshot_age_days": 1, "min_snapshot_to_keep": 1}
        maintenance.maintenance.attach(policy_type, Securable("table", "test", ("a",), "mine"), content)
        run = _run(maintenance, table, policy_type, int(time.time() * 1000) + 10 * DAY_MS)
        assert run.status == "failed", (policy_type, run.status, run.plan, run.outcome)
        assert run.error.startswith("ForeignFile: Maintenance refused to read the table: "), run.error
        assert foreign in run.error and "outside the table's locations" in run.error
        assert run.files_removed == 0
    assert scene.admin.get(table_url("a", "mine")).json() == mine_after_commit
    assert scene.victim_objects(store) == victim_before
    assert scene.catalog.load("b", "victim").scan().to_arrow().to_pylist() == VICTIM_ROWS  # B intact


def test_a_plan_in_the_background_fails_the_same_way(scene, store):
    """A scan large by its snapshot's summary is planned in the background: fetchPlanningResult
    reports it failed with the same 400, and no page of tasks was stored."""
    manifest_list, foreign = _victims_manifests(scene, store, 5151)
    committed = scene.commit_snapshot(scene.api, manifest_list, 5151, **{"total-data-files": "1000000"})
    assert committed.status_code == 200, committed.text
    submitted = scene.api.post(f"{table_url('a', 'mine')}/plan", json={})
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted", submitted.text
    plan_url = f"{table_url('a', 'mine')}/plan/{submitted.json()['plan-id']}"
    deadline = time.monotonic() + 30
    while (answer := scene.api.get(plan_url).json())["status"] == "submitted":
        assert time.monotonic() < deadline, "the background plan never finished"
        threading.Event().wait(0.05)
    assert answer["status"] == "failed", answer
    assert answer["error"]["code"] == 400 and answer["error"]["type"] == "BadRequestException"
    assert foreign in answer["error"]["message"] and "outside the table's locations" in answer["error"]["message"]
    assert not [text for text in scene.victim_texts() if text in str(answer)]


def _run(maintenance: Any, table: Any, policy_type: str, now_ms: int) -> Any:
    from app.maintenance.runs import MaintenanceBusy

    deadline = time.monotonic() + 30
    while True:
        try:
            return maintenance.executor.run(table, policy_type, dry_run=False, now_ms=now_ms)
        except MaintenanceBusy:  # a background run holds the table: wait for its lease to go
            assert time.monotonic() < deadline, "the table's maintenance lease was never released"
            threading.Event().wait(0.05)


# -- the preview of a table it cannot read ---------------------------------------------------


@pytest.fixture
def admin_console(app, client) -> Iterator[Any]:
    yield sign_in(app, TEST_CLIENT_ID, TEST_CLIENT_SECRET)


def test_the_preview_of_a_snapshot_whose_manifest_list_is_missing_is_a_page(scene, admin_console):
    missing = f"{scene.mine.metadata.location}/metadata/snap-6161-1-{uuid.uuid4()}.avro"  # never written
    assert scene.commit_snapshot(scene.admin, missing, 6161).status_code == 200

    page = admin_console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "mine"})

    assert page.status_code == 422 and page.headers["content-type"].startswith("text/html"), page.text
    assert "Cannot be shown" in page.text and "does not exist" in page.text and missing in page.text
    assert "roll back" in page.text  # what to do next
    older = admin_console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "mine", "snapshot": scene.first})
    assert older.status_code == 200 and "mine-10" in older.text


def test_the_preview_of_parquet_files_without_field_ids_is_a_page(scene, admin_console):
    """Files written outside Iceberg (no field ids), added by a manifest, without a name mapping."""
    mine = scene.mine
    path = f"{mine.metadata.location}/data/imported-{uuid.uuid4()}.parquet"
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"id": 7, "secret": "imported-7"}], schema=ARROW), buffer)
    with scene.io.new_output(path).create() as stream:
        stream.write(buffer.getvalue())
    assert pq.read_schema(io.BytesIO(buffer.getvalue())).field("id").metadata is None  # no field id
    data_file = parquet_file_to_data_file(scene.io, mine.metadata, path)
    manifest = scene.manifest_of([data_file], 7171)
    assert scene.commit_snapshot(scene.admin, scene.manifest_list_of([manifest], 7171), 7171).status_code == 200

    page = admin_console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "mine"})

    assert page.status_code == 422 and page.headers["content-type"].startswith("text/html"), page.text
    assert "carry no Iceberg field ids" in page.text and "schema.name-mapping.default" in page.text
    assert "imported-7" not in page.text


# -- a table's own data path -----------------------------------------------------------------

DATA_PATH_ROWS = [{"id": 20, "secret": "data-path-20"}, {"id": 21, "secret": "data-path-21"}]


def test_a_tables_own_data_path_is_read_and_another_tables_is_refused(app, scene, store, admin_console):
    """``a.paths`` sets ``write.data.path`` outside its location (inside namespace ``a``'s home, as
    Spark and PyIceberg write there): the data files are its own (it claimed the folder; signing and
    STS serve it), so planning, the preview and maintenance read them. ``a.mine`` naming the same
    files in a manifest of its own is refused by every reader: a data path is one table's."""
    home = scene.mine.metadata.location.rsplit("/", 1)[0]
    data_path = f"{home}/paths-data-{uuid.uuid4().hex[:8]}"
    body = {"name": "paths", "schema": SCHEMA, "properties": {"format-version": "2", "write.data.path": data_path}}
    made = scene.admin.post(f"{PREFIX}/namespaces/a/tables", json=body)
    assert made.status_code == 200, made.text
    location = made.json()["metadata"]["location"]
    assert not Location.parse(data_path).is_within(Location.parse(location))  # outside its location
    scene.catalog.load("a", "paths").append(pa.Table.from_pylist(DATA_PATH_ROWS, schema=ARROW))
    table = scene.catalog.load("a", "paths")
    files = [
        entry.data_file.file_path
        for manifest in table.current_snapshot().manifests(scene.io)
        for entry in manifest.fetch_manifest_entry(scene.io)
    ]
    assert files and all(path.startswith(f"{data_path}/") for path in files), files

    planned = scene.admin.post(f"{table_url('a', 'paths')}/plan", json={})
    assert planned.status_code == 200, planned.text
    tasks = planned.json()["file-scan-tasks"]
    assert sorted(task["data-file"]["file-path"] for task in tasks) == sorted(files)

    page = admin_console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "paths"})
    assert page.status_code == 200, page.text
    assert all(row["secret"] in page.text for row in DATA_PATH_ROWS)

    maintenance = services_of(app.app).maintenance
    entry = maintenance.maintenance.table("test", ("a",), "paths")
    maintenance.maintenance.schedule(entry.entry_id, 86_400)  # the schedule stays off: the test runs it
    content = {"enable": True, "config": {"max_snapshot_age_days": 1, "min_snapshot_to_keep": 1}}
    maintenance.maintenance.attach("system.snapshot-expiry", Securable("table", "test", ("a",), "paths"), content)
    run = _run(maintenance, entry, "system.snapshot-expiry", int(time.time() * 1000) + 10 * DAY_MS)
    assert run.status == "succeeded", (run.status, run.error)
    assert scene.catalog.load("a", "paths").scan().to_arrow().to_pylist() == DATA_PATH_ROWS

    # the same files named by a.mine's own manifest: another table's data path, refused by every reader
    taken = [
        entry.data_file
        for m in table.current_snapshot().manifests(scene.io)
        for entry in m.fetch_manifest_entry(scene.io)
    ]
    own = list(scene.mine.current_snapshot().manifests(scene.io))
    manifest_list = scene.manifest_list_of([*own, scene.manifest_of(taken, 8181)], 8181)
    assert scene.commit_snapshot(scene.api, manifest_list, 8181).status_code == 200
    refused = scene.api.post(f"{table_url('a', 'mine')}/plan", json={})
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert message.startswith("Cannot plan the scan: ") and "outside the table's locations" in message
    assert taken[0].file_path in message
    page = scene.console.get("/ui/w/test/table/preview", params={"ns": "a", "name": "mine"})
    assert page.status_code == 400 and "outside the table" in page.text
    assert not [row["secret"] for row in DATA_PATH_ROWS if row["secret"] in page.text]
