"""What a new user runs, run as they run it: ``make run``, then ``make example`` on both Spark lines.

The server is ``make run`` itself (embedded PostgreSQL and SeaweedFS, authentication on, the
product's default credentials mode, the credential it writes to its data directory), on
throwaway ports and a data directory of its own, in an environment holding none of the suite's
``GROWLER_*`` settings. The example is ``make example`` as the README shows it, told only where
the server is. Its output tables are then read back with PyIceberg (on the same defaults) and
the bucket is listed: every object lies inside one of the example's tables.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import minio
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, TimestampType

from scripts.processes import free_port
from scripts.run import DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY
from tests.integration.proc_support import wait_for
from tests.integration.spark_support import java17_home

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 600  # the first `make run` on a machine may install packages
EXAMPLE_TIMEOUT_S = 600

# raw orders minus the empty one, merged with the corrections (examples/pipeline.py)
ORDERS = [
    (1001, "alice", "tea-green", 2, 9.0, "paid"),
    (1002, "bob", "tea-black", 2, 7.8, "paid"),
    (1004, "alice", "mug", 2, 24.0, "paid"),
    (1006, "bob", "kettle", 1, 35.0, "paid"),
    (1007, "carol", "tea-black", 3, 11.7, "paid"),
    (1008, "erin", "tea-green", 4, 18.0, "paid"),
]

CLICKS = Schema(NestedField(1, "id", LongType()), NestedField(2, "at", TimestampType()))


@dataclass
class MakeRun:
    url: str
    data_dir: Path
    s3_endpoint: str
    process: subprocess.Popen
    log_path: Path

    @property
    def credential(self) -> str:
        return (self.data_dir / "credential").read_text().strip()


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: the suite's ``GROWLER_*`` settings removed."""
    ours = ("GROWLER_", "PROMETHEUS_", "MAKE", "MFLAGS")  # and those of the `make test` running the suite
    env = {name: value for name, value in os.environ.items() if not name.startswith(ours)}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def make_run() -> Iterator[MakeRun]:
    root = Path(tempfile.mkdtemp(prefix="growler-make-run-"))  # not pytest's basetemp: postgres must traverse it
    port, s3_port = free_port(), free_port()
    env = user_env(
        GROWLER_DATA_DIR=str(root / "data"),
        GROWLER_BIND=f"127.0.0.1:{port}",
        GROWLER_EMBEDDED_PG_PORT=str(free_port()),
        GROWLER_EMBEDDED_S3_PORT=str(s3_port),
    )
    log_path = root / "make-run.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = MakeRun(f"http://127.0.0.1:{port}", root / "data", f"http://127.0.0.1:{s3_port}", process, log_path)
    try:
        wait_for(
            lambda: "Growler is up" in log_path.read_text(errors="replace") or process.poll() is not None,
            "make run to come up",
            START_TIMEOUT_S,
        )
        assert process.poll() is None, f"make run exited with {process.returncode}:\n{log_path.read_text()}"
        assert httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C, as the README says
            try:
                process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("line", ["3.5", "4.1"])
def test_make_example_runs_on_what_make_run_serves(make_run, line):
    example = subprocess.run(
        ["make", "--no-print-directory", "example", f"SPARK_LINE={line}", f"EXAMPLE_ARGS=--uri {make_run.url}"],
        cwd=REPO,
        env=user_env(GROWLER_DATA_DIR=str(make_run.data_dir)),  # where make run wrote the credential
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
    )
    output = example.stdout + example.stderr
    assert example.returncode == 0, output[-6000:]
    for step in ("=== 1. ingest", "=== 2. transform", "=== 3. merge", "=== 4. query"):
        assert step in output, output[-6000:]

    catalog = RestCatalog("growler", uri=make_run.url, warehouse="warehouse", credential=make_run.credential)
    raw = catalog.load_table("demo.raw_orders").scan().to_arrow()
    assert sorted(raw.column("order_id").to_pylist()) == list(range(1001, 1008))
    orders = catalog.load_table("demo.orders")
    got = sorted(
        (r["order_id"], r["customer"], r["sku"], r["qty"], r["amount"], r["status"])
        for r in orders.scan().to_arrow().to_pylist()
    )
    assert got == ORDERS
    current = orders.current_snapshot()
    assert current.summary.operation.value == "overwrite"  # the MERGE
    parent = orders.snapshot_by_id(current.parent_snapshot_id)
    assert parent.summary.operation.value == "overwrite"  # CREATE OR REPLACE TABLE AS SELECT

    assert strays(make_run, catalog) == []


def strays(make_run: MakeRun, catalog: RestCatalog) -> list[str]:
    """Objects in the warehouse's bucket that lie in no table's location."""
    locations = [
        catalog.load_table(identifier).location().rstrip("/") + "/"
        for namespace in catalog.list_namespaces()
        for identifier in catalog.list_tables(namespace)
    ]
    store = minio.Minio(
        make_run.s3_endpoint.removeprefix("http://"), DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY, secure=False
    )
    found = (f"s3://growler-warehouse/{o.object_name}" for o in store.list_objects("growler-warehouse", recursive=True))
    return [uri for uri in found if not any(uri.startswith(location) for location in locations)]


def readme_snippet(name: str, make_run: MakeRun, *, page: str = "README.md", language: str = "python") -> str:
    """The ``<!-- readme-snippet: name -->`` block of ``page`` (README.md or a docs/ page), pointed
    at this server (its URL and the credential file of its data directory instead of
    ``.growler``): otherwise as written."""
    text = (REPO / page).read_text()
    marker = f"<!-- readme-snippet: {name} -->\n```{language}\n"
    start = text.index(marker) + len(marker)
    code = text[start : text.index("```", start)]
    assert "http://127.0.0.1:8181" in code and ".growler/credential" in code
    return code.replace("http://127.0.0.1:8181", make_run.url).replace(
        ".growler/credential", str(make_run.data_dir / "credential")
    )


def run_shell_snippet(code: str) -> str:
    """A ``sh`` snippet run by bash, stopping at the first failing command."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=REPO,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return done.stdout


def run_snippet(code: str, python: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [python, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return done.stdout


def test_readme_client_snippets_run_as_written(make_run):
    env = user_env(JAVA_HOME=java17_home() or "")
    assert run_snippet(readme_snippet("pyiceberg", make_run), sys.executable, env).split()[-1] == "2"
    assert run_snippet(readme_snippet("pyiceberg-signing", make_run), sys.executable, env).split()[-1] == "2"
    # (its other choice, remote-signing, is what the signing catalogs of spark_sql/conftest.py ask for)
    assert run_snippet(readme_snippet("spark", make_run), sys.executable, env).split()[-1] == "2"
    catalog = RestCatalog("growler", uri=make_run.url, warehouse="warehouse", credential=make_run.credential)
    totals = catalog.load_table("sales.totals").scan().to_arrow().to_pylist()
    assert sorted((row["item"], row["n"]) for row in totals) == [("mug", 1), ("tea", 1)]
    assert strays(make_run, catalog) == []


def json_values(output: str) -> list[dict]:
    """The JSON documents curl printed one after the other (curl -s adds no newline)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := len(output) - len(output[at:].lstrip())) < len(output):
        value, at = decoder.raw_decode(output, at)
        values.append(value)
    return values


def test_readme_curl_snippet_runs_as_written(make_run):
    """The README's first steps with curl: a token from the credential make run wrote, the config,
    a namespace created and listed."""
    output = run_shell_snippet(readme_snippet("curl", make_run, language="sh"))
    config, created, listed = json_values(output)
    assert config["overrides"]["prefix"] == "warehouse"
    # made here, or (409) by a README snippet this module ran before: either way it is listed
    assert created.get("namespace") == ["sales"] or created["error"]["code"] == 409, created
    assert ["sales"] in listed["namespaces"]


def test_security_worked_example_runs_as_written(make_run):
    """docs/security.md's worked example, run as written against make run (after creating the
    bucket it says must exist): the principal it makes may create tables in its namespace and do
    nothing outside its grants."""
    store = minio.Minio(
        make_run.s3_endpoint.removeprefix("http://"), DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY, secure=False
    )
    if not store.bucket_exists("growler-marketing"):
        store.make_bucket("growler-marketing")
    output = run_shell_snippet(
        readme_snippet("security-worked-example", make_run, page="docs/security.md", language="sh")
    )
    made = [value for value in json_values(output) if "client-id" in value]
    assert [principal["client-id"] for principal in made] == ["etl"]
    etl = RestCatalog("etl", uri=make_run.url, warehouse="marketing", credential=f"etl:{made[0]['client-secret']}")
    created = etl.create_table(("campaigns", "clicks"), schema=CLICKS)
    assert etl.load_table(("campaigns", "clicks")).metadata.table_uuid == created.metadata.table_uuid
    with pytest.raises(ForbiddenError):
        etl.create_namespace("elsewhere")
    with pytest.raises(ForbiddenError):  # the default warehouse: not even its config
        RestCatalog("etl", uri=make_run.url, warehouse="warehouse", credential=f"etl:{made[0]['client-secret']}")


def test_readme_recycle_bin_example_runs_as_written(make_run):
    """The README's recycle bin example, after its client snippets made ``sales.totals``: curl drops
    the table, lists the bin, undrops it under a new name and protects it; Spark writes to it and
    is refused its drop. The restored table is the dropped one: same uuid, snapshots and rows."""
    catalog = RestCatalog("growler", uri=make_run.url, warehouse="warehouse", credential=make_run.credential)
    before = catalog.load_table("sales.totals")
    env = user_env(JAVA_HOME=java17_home() or "")
    done = subprocess.run(
        ["bash", "-e", "-c", readme_snippet("recycle-bin", make_run, language="sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"name":"totals_restored"' in done.stdout.replace(" ", ""), done.stdout
    assert not catalog.table_exists("sales.totals")
    restored = catalog.load_table("sales.totals_restored")
    assert restored.metadata.table_uuid == before.metadata.table_uuid
    assert [s.snapshot_id for s in restored.snapshots()] == [s.snapshot_id for s in before.snapshots()]

    output = run_snippet(readme_snippet("recycle-bin-spark", make_run), sys.executable, env).split()
    assert output[-3:] == ["refused:", "True", "3"]  # the two rows it had, one written, the drop refused
    assert catalog.table_exists("sales.totals_restored")
    assert strays(make_run, catalog) == []
