"""Growler's own readers apply the caller's read restrictions (issue 51): the console's preview and
table page, and server-side scan planning.

Two principals read ``hr.people``: ``restricted`` (its role held to region eu, without the salary
column, with masked emails) and ``free``. The rows are real, written by PyIceberg through the
test client in three appends - three data files: eu rows, us rows, and a mixed file of 60 us rows
then one eu row (its stats span both regions, so it cannot be pruned, and its eu row comes after
more rows than the preview shows: a filter applied after the row limit would lose it).
"""

from __future__ import annotations

import dataclasses
import html
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from app.composition.services import services_of
from tests.api.authz_support import MANAGEMENT, PREFIX
from tests.api.seams.test_ownership_readers import ClientCatalog, sign_in
from tests.api.test_read_restrictions import EU_ONLY, NO_SALARY, PEOPLE, restrict, trust
from tests.conftest import fetch_token

PEOPLE_URL = f"{PREFIX}/namespaces/hr/tables/people"
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("salary", pa.float64()),
        pa.field("email", pa.string()),
    ]
)
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}
EVERY_STAT = ["id", "region", "salary", "email"]


def _person(person_id: int, region: str) -> dict[str, Any]:
    return {"id": person_id, "region": region, "salary": 1000.0 + person_id, "email": f"p{person_id}@corp.{region}"}


EU_ROWS = [_person(i, "eu") for i in (1, 2, 3)]
US_ROWS = [_person(i, "us") for i in (4, 5, 6)]
MIXED_ROWS = [_person(i, "us") for i in range(100, 160)] + [_person(160, "eu")]


@dataclass
class Reader:
    name: str
    role: str
    api: Any  # the catalog API with this principal's token
    console: Any  # a console session of this principal


def _reader(app: Any, principals: Any, label: str) -> Reader:
    caller = principals.new(label)
    principals.grant(caller, "read", "table", "test", ("hr",), "people")
    secret = principals.admin.post(f"{MANAGEMENT}/principals/{caller.name}/rotate").json()["client-secret"]
    token = fetch_token(app.anonymous_client(), caller.name, secret)  # (the rotation revoked the first)
    api = app.anonymous_client(headers={"Authorization": f"Bearer {token}"})
    return Reader(caller.name, caller.role, api, sign_in(app, caller.name, secret))


@dataclass
class Scene:
    restricted: Reader
    free: Reader
    files: dict[str, str]  # eu, us, mixed -> data file path
    two_appends: int  # the snapshot holding the eu and us files only


@pytest.fixture
def file_io(settings) -> PyArrowFileIO:
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
def scene(app, client, principals, file_io) -> Scene:
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["hr"]}).status_code == 200
    created = client.post(
        f"{PREFIX}/namespaces/hr/tables",
        json={"name": "people", "schema": PEOPLE, "properties": {"format-version": "2"}},
    )
    assert created.status_code == 200, created.text
    catalog = ClientCatalog(client, file_io)
    files: dict[str, str] = {}
    two_appends = 0
    for label, rows in (("eu", EU_ROWS), ("us", US_ROWS), ("mixed", MIXED_ROWS)):
        before = set(_data_files(catalog, file_io))
        catalog.load("hr", "people").append(pa.Table.from_pylist(rows, schema=ARROW))
        (files[label],) = set(_data_files(catalog, file_io)) - before  # one file per append
        if label == "us":
            two_appends = catalog.load("hr", "people").current_snapshot().snapshot_id
    restricted, free = _reader(app, principals, "restricted"), _reader(app, principals, "free")
    policy = {"row-filter": EU_ONLY, "columns": NO_SALARY}
    body = {"type": "table", "namespace": ["hr"], "name": "people"}
    answer = restrict(client, ("role", restricted.role), body, **policy)
    assert answer.status_code == 200, answer.text
    principals.settle()
    return Scene(restricted, free, files, two_appends)


def _data_files(catalog: ClientCatalog, file_io: PyArrowFileIO) -> list[str]:
    snapshot = catalog.load("hr", "people").current_snapshot()
    if snapshot is None:
        return []
    return [
        entry.data_file.file_path
        for manifest in snapshot.manifests(file_io)
        for entry in manifest.fetch_manifest_entry(file_io)
    ]


def _masked(email: str) -> str:
    """mask-alphanum as the spec writes it: letters x, digits n, punctuation kept."""
    return re.sub(r"[0-9]", "n", re.sub(r"[^0-9(),.\-@]", "x", email))


def _preview(console: Any, snapshot: int | None = None) -> tuple[list[str], list[list[str]]]:
    params: dict[str, Any] = {"ns": "hr", "name": "people"}
    if snapshot is not None:
        params["snapshot"] = snapshot
    page = console.get("/ui/w/test/table/preview", params=params)
    assert page.status_code == 200, page.text
    table = page.text.split('id="preview"', 1)[1].split("</table>", 1)[0]
    head, body = table.split("</thead>", 1)
    columns = [html.unescape(cell) for cell in re.findall(r"<th scope=\"col\">(.*?)</th>", head)]
    rows = [
        [html.unescape(cell) for cell in re.findall(r"<td>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]
    return columns, rows


def _as_text(row: dict[str, Any], columns: list[str]) -> list[str]:
    return [str(row[column]) for column in columns]


# -- the console ---------------------------------------------------------------------------


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "trusted-engine"])
def test_the_preview_shows_each_caller_exactly_their_rows_and_columns(client, principals, scene, trusted):
    if trusted:  # the console applies the restrictions itself: a trusted engine sees the same
        assert trust(client, scene.restricted.name).status_code == 200
        principals.settle()

    columns, rows = _preview(scene.restricted.console, scene.two_appends)
    assert columns == ["id", "region", "email"]  # no salary column
    expected = [{**row, "email": _masked(row["email"])} for row in EU_ROWS]
    assert sorted(rows) == sorted(_as_text(row, columns) for row in expected)

    free_columns, free_rows = _preview(scene.free.console, scene.two_appends)
    assert free_columns == ["id", "region", "salary", "email"]
    assert sorted(free_rows) == sorted(_as_text(row, free_columns) for row in EU_ROWS + US_ROWS)

    # the current snapshot: 67 rows, more than the preview's 50; the filter comes first, so the
    # eu row at the end of the mixed file is there
    columns, rows = _preview(scene.restricted.console)
    assert sorted(int(row[0]) for row in rows) == [1, 2, 3, 160]
    assert {row[1] for row in rows} == {"eu"}
    _, free_rows = _preview(scene.free.console)
    assert len(free_rows) == 50  # the limit: the table has more rows than a preview shows


def test_the_table_page_shows_a_restricted_caller_its_restrictions_without_403(scene):
    page = scene.restricted.console.get("/ui/w/test/table", params={"ns": "hr", "name": "people"})
    assert page.status_code == 200, page.text  # its loadTable is a 403: the page does not use it
    assert "Your read restrictions" in page.text
    assert html.unescape(re.search(r'<code id="restricted-rows">(.*?)</code>', page.text).group(1)) == (
        '{"type": "eq", "term": "region", "value": "eu"}'
    )
    schema = page.text.split('id="h-schema"', 1)[1].split("</table>", 1)[0]
    fields = re.findall(r"<tr class=.*?</tr>", schema)
    assert [re.search(r"<td>(\d+)</td>", row).group(1) for row in fields] == ["1", "2", "3", "4"]  # every column
    marks = {
        re.search(r"<td>(\d+)</td>", row).group(1): badge.group(1)
        for row in fields
        if (badge := re.search(r'<span class="badge restriction">([^<]+)</span>', row))
    }
    assert marks == {"3": "hide", "4": "mask-alphanum"}  # marked, not left out
    assert scene.restricted.api.get(PEOPLE_URL).status_code == 403  # (its loadTable)
    # the whole table's counts (every row's) are not shown: no chart data, no counts per snapshot
    assert 'id="chart-data"' not in page.text and 'id="charts-restricted"' in page.text
    assert "restricted-counts" in page.text and "total-records" not in page.text

    free = scene.free.console.get("/ui/w/test/table", params={"ns": "hr", "name": "people"})
    assert free.status_code == 200
    assert "Your read restrictions" not in free.text and "badge restriction" not in free.text
    assert 'id="chart-data"' in free.text and "restricted-counts" not in free.text


def test_the_health_and_runs_name_partitions_so_a_restricted_caller_reads_neither(scene):
    """A table's health report and its maintenance runs name its partitions, whose values are its
    rows' data: refused to a reader restricted on the table, through the API and the console (whose
    pages show the policies and say why the rest is not shown); another reader gets them."""
    table = f"{MANAGEMENT}/maintenance/warehouses/test/namespaces/hr/tables/people"
    for path in ("health", "runs", "runs/1"):
        refused = scene.restricted.api.get(f"{table}/{path}")
        assert refused.status_code == 403, refused.text
        assert "names the table's partitions" in refused.json()["error"]["message"]
    assert scene.restricted.api.get(f"{table}/policies").status_code == 200
    assert scene.free.api.get(f"{table}/health").status_code == 200
    assert scene.free.api.get(f"{table}/runs").status_code == 200

    params = {"warehouse": "test", "ns": "hr", "name": "people"}
    page = scene.restricted.console.get("/ui/maintenance", params=params)
    assert page.status_code == 200, page.text
    assert 'id="table-health"' not in page.text and "names the table&#39;s partitions" in page.text
    assert 'id="table-health"' in scene.free.console.get("/ui/maintenance", params=params).text
    table_page = {"ns": "hr", "name": "people"}
    assert 'id="table-health"' not in scene.restricted.console.get("/ui/w/test/table", params=table_page).text
    assert 'id="table-health"' in scene.free.console.get("/ui/w/test/table", params=table_page).text


# -- server-side scan planning ---------------------------------------------------------------


def _tasks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    assert answer["status"] == "completed", answer
    return answer["file-scan-tasks"]


def _stats_ids(task: dict[str, Any]) -> set[int]:
    data_file = task["data-file"]
    keys = ("column-sizes", "value-counts", "null-value-counts", "nan-value-counts", "lower-bounds", "upper-bounds")
    return {key for name in keys for key in data_file.get(name, {}).get("keys", [])}


def test_planning_gives_each_caller_their_files_residuals_and_stats(scene):
    free = scene.free.api.post(f"{PEOPLE_URL}/plan", json={"stats-fields": EVERY_STAT})
    assert free.status_code == 200, free.text
    tasks = _tasks(free.json())
    assert sorted(task["data-file"]["file-path"] for task in tasks) == sorted(scene.files.values())
    assert {task["residual-filter"] for task in tasks} == {True}
    assert all({3, 4} <= _stats_ids(task) for task in tasks)

    planned = scene.restricted.api.post(f"{PEOPLE_URL}/plan", json={"stats-fields": EVERY_STAT})
    assert planned.status_code == 200, planned.text
    tasks = _tasks(planned.json())
    paths = sorted(task["data-file"]["file-path"] for task in tasks)
    assert paths == sorted([scene.files["eu"], scene.files["mixed"]])  # the us file: pruned
    assert [task["residual-filter"] for task in tasks] == [EU_ONLY, EU_ONLY]
    for task in tasks:
        assert 2 in _stats_ids(task) and not _stats_ids(task) & {3, 4}  # nothing of salary or email
    assert "storage-credentials" not in planned.json()


def test_a_filter_on_a_hidden_column_prunes_nothing_for_the_restricted_caller(scene):
    """Pruning by salary would tell which files hold such salaries; the engine applies it instead."""
    over = {"type": "gt", "term": "salary", "value": 1050}  # only the mixed file's rows qualify
    free = _tasks(scene.free.api.post(f"{PEOPLE_URL}/plan", json={"filter": over}).json())
    assert [task["data-file"]["file-path"] for task in free] == [scene.files["mixed"]]

    tasks = _tasks(scene.restricted.api.post(f"{PEOPLE_URL}/plan", json={"filter": over}).json())
    assert sorted(task["data-file"]["file-path"] for task in tasks) == sorted([scene.files["eu"], scene.files["mixed"]])
    kept = {"type": "and", "left": EU_ONLY, "right": {"type": "gt", "term": "salary", "value": 1050.0}}
    assert [task["residual-filter"] for task in tasks] == [kept, kept]


def test_vended_credentials_in_a_plan_only_for_a_trusted_engine(client, principals, scene):
    refused = scene.restricted.api.post(f"{PEOPLE_URL}/plan", json={}, headers=VENDED)
    assert refused.status_code == 403, refused.text
    assert "not a trusted engine" in refused.json()["error"]["message"]
    # a plan without credentials, then its credentials by plan id: refused the same way
    plan_id = scene.restricted.api.post(f"{PEOPLE_URL}/plan", json={}).json()["plan-id"]
    assert scene.restricted.api.get(f"{PEOPLE_URL}/credentials", params={"planId": plan_id}).status_code == 403
    assert scene.restricted.api.get(f"{PEOPLE_URL}/plan/{plan_id}", headers=VENDED).status_code == 403

    assert trust(client, scene.restricted.name).status_code == 200
    principals.settle()
    vended = scene.restricted.api.post(f"{PEOPLE_URL}/plan", json={}, headers=VENDED)
    assert vended.status_code == 200, vended.text
    assert vended.json()["storage-credentials"]
    assert len(_tasks(vended.json())) == 2  # still its own files
    credentials = scene.restricted.api.get(f"{PEOPLE_URL}/credentials", params={"planId": plan_id})
    assert credentials.status_code == 200 and credentials.json()["storage-credentials"]


@pytest.fixture
def in_background(app) -> Iterator[None]:
    """Every plan of this worker planned on its planning threads, one task a page."""
    planning = services_of(app.app).planning
    config = planning.config
    planning.config = dataclasses.replace(config, async_min_files=0, page_size=1)
    yield
    planning.config = config


def _completed(api: Any, plan_id: str) -> dict[str, Any]:
    """fetchPlanningResult until the background plan is no longer submitted."""
    deadline = time.monotonic() + 30
    tick = threading.Event()
    while (answer := api.get(f"{PEOPLE_URL}/plan/{plan_id}").json())["status"] == "submitted":
        assert time.monotonic() < deadline, "the background plan never finished"
        tick.wait(0.02)
    return answer


def test_a_background_plan_carries_the_restrictions_of_the_caller_who_asked(scene, in_background):
    submitted = scene.restricted.api.post(f"{PEOPLE_URL}/plan", json={"stats-fields": EVERY_STAT})
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted", submitted.text
    plan_id = submitted.json()["plan-id"]
    answer = _completed(scene.restricted.api, plan_id)
    (plan_task,) = answer["plan-tasks"]  # two files, one a page
    second = scene.restricted.api.post(f"{PEOPLE_URL}/tasks", json={"plan-task": plan_task})
    assert second.status_code == 200, second.text
    tasks = _tasks(answer) + second.json()["file-scan-tasks"]
    assert sorted(task["data-file"]["file-path"] for task in tasks) == sorted([scene.files["eu"], scene.files["mixed"]])
    assert [task["residual-filter"] for task in tasks] == [EU_ONLY, EU_ONLY]
    assert not [task for task in tasks if _stats_ids(task) & {3, 4}]

    # the plan is the restricted caller's: its id passed on widens nothing, either way round
    assert scene.free.api.get(f"{PEOPLE_URL}/plan/{plan_id}").status_code == 404
    assert scene.free.api.post(f"{PEOPLE_URL}/tasks", json={"plan-task": plan_task}).status_code == 404
    free_plan = scene.free.api.post(f"{PEOPLE_URL}/plan", json={}).json()["plan-id"]
    assert _completed(scene.free.api, free_plan)["status"] == "completed"
    refused = scene.restricted.api.get(f"{PEOPLE_URL}/plan/{free_plan}")
    assert refused.status_code == 404 and "other read restrictions" in refused.json()["error"]["message"]
