"""What the commit stress tests check after a load: the outcome read back from the catalog, the
bucket and PostgreSQL, the invariants (``verify``), the sweeper, and the server's workers."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from typing import Any

import httpx
import psycopg

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.integration.conftest import REPO, Server, server_env
from tests.integration.stress_load import (
    ACK,
    PREFIX,
    REJECTED,
    REQUEST_TIMEOUT_S,
    UNKNOWN,
    Attempt,
    Load,
    main_snapshot_id,
    worker_pids,
)


def lineage(metadata: dict[str, Any]) -> list[int]:
    """Snapshot ids from main back to the first one, by parent ids (a cycle fails)."""
    by_id = {s["snapshot-id"]: s for s in metadata.get("snapshots") or []}
    chain: list[int] = []
    current = main_snapshot_id(metadata)
    while current is not None:
        assert current not in chain, f"cycle in the snapshot lineage at {current}"
        assert current in by_id, f"main's lineage names snapshot {current}, which the table does not have"
        chain.append(current)
        current = by_id[current].get("parent-snapshot-id")
    return chain


def load_final(server: Server, load: Load, table: str) -> dict[str, Any]:
    response = httpx.get(f"{server.url}{load.table_path(table)}", timeout=REQUEST_TIMEOUT_S)
    assert response.status_code == 200, response.text
    return response.json()


def read_metadata_object(store: S3ObjectStore, location: str) -> dict[str, Any]:
    data = store.read(Location.parse(location))
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def metadata_objects(store: S3ObjectStore, table_location: str) -> set[str]:
    listed = store.list(Location.parse(table_location))
    return {obj.uri for obj in listed if obj.uri.endswith(".metadata.json")}


def pending_records(services, table_location: str) -> list[str]:
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT location FROM pending_object WHERE starts_with(location, %s)", (table_location.rstrip("/") + "/",)
        ).fetchall()
    return [row[0] for row in rows]


def verify(load: Load, store: S3ObjectStore, services, *, strict: bool) -> None:
    """Every invariant of the module docstring; ``strict``: the no-fault run (no unknowns, exact sizes)."""
    attempts = load.attempts
    if strict:
        unknown = [a for a in attempts if a.outcome == UNKNOWN]
        assert not unknown, f"{len(unknown)} commits failed without faults, e.g. {unknown[:3]}"
        assert not load.load_failures, f"loads failed without faults: {load.load_failures[:5]}"

    finals = {name: load_final(load.server, load, name) for name in [load.append_table, *load.tx_tables]}
    chains = {}
    for name, final in finals.items():
        metadata = final["metadata"]
        chain = lineage(metadata)
        chains[name] = set(chain)
        ids = [s["snapshot-id"] for s in metadata.get("snapshots") or []]
        assert len(ids) == len(set(ids)), f"{name}: a snapshot id occurs twice in snapshots"
        assert set(ids) == set(chain), f"{name}: snapshots outside main's lineage: {set(ids) - set(chain)}"
        assert metadata["last-sequence-number"] == len(chain), name
        by_id = {s["snapshot-id"]: s for s in metadata["snapshots"] or []}
        assert [by_id[sid]["sequence-number"] for sid in chain] == list(range(len(chain), 0, -1)), name

        sent = {a.snapshots[name]: a for a in attempts if name in a.snapshots}
        acked = {sid for sid, a in sent.items() if a.outcome == ACK}
        rejected = {sid for sid, a in sent.items() if a.outcome == REJECTED}
        lost = acked - set(chain)
        assert not lost, f"{name}: {len(lost)} acknowledged snapshots are not in the lineage: {sorted(lost)[:10]}"
        applied = rejected & set(chain)
        assert not applied, f"{name}: {len(applied)} snapshots answered 409 are in the lineage: {sorted(applied)[:10]}"
        strangers = set(chain) - set(sent)
        assert not strangers, f"{name}: snapshots nobody sent in the lineage: {sorted(strangers)[:10]}"

        # what is stored is what loadTable returns
        assert read_metadata_object(store, final["metadata-location"]) == metadata, name

        # no orphan: every metadata object is the current one or in the log, and all of those exist
        referenced = {final["metadata-location"]} | {e["metadata-file"] for e in metadata.get("metadata-log") or []}
        stored = metadata_objects(store, metadata["location"])
        orphans, missing = stored - referenced, referenced - stored
        assert not orphans, f"{name}: {len(orphans)} orphan metadata objects, e.g. {sorted(orphans)[:3]}"
        assert not missing, f"{name}: {len(missing)} referenced metadata objects are gone: {sorted(missing)[:3]}"
        assert not pending_records(services, metadata["location"]), f"{name}: pending records left"

    s = load.sizes
    append_chain = chains[load.append_table]
    if strict:
        assert len(append_chain) == s.writers * s.appends
        assert load.count("transaction", ACK) == s.tx_writers * s.tx_commits
    else:
        assert len(append_chain) >= s.writers * s.appends + 1  # + the probe of still_serving

    # transactions: all or nothing, in every case
    for attempt in attempts:
        if attempt.kind != "transaction":
            continue
        present = {name for name, sid in attempt.snapshots.items() if sid in chains[name]}
        if attempt.outcome == ACK:
            assert present == set(attempt.snapshots), f"acknowledged transaction partly missing: {attempt}"
        elif attempt.outcome == REJECTED:
            assert not present, f"rejected transaction partly applied: {attempt}"
        else:
            assert present in (set(), set(attempt.snapshots)), f"transaction applied in part: {attempt}"

    # properties: acknowledged ones are there, rejected ones are not
    properties = finals[load.append_table]["metadata"].get("properties") or {}
    for attempt in attempts:
        if attempt.kind != "property":
            continue
        for key, value in attempt.properties.items():
            if attempt.outcome == ACK:
                assert properties.get(key) == value, f"acknowledged property lost: {attempt}"
            elif attempt.outcome == REJECTED:
                assert key not in properties, f"rejected property applied: {attempt}"


def sweep(settings, server: Server) -> dict[str, int]:
    """One housekeeping round with no grace, as an operator would run it (``python -m app.housekeeping``)."""
    env = server_env(settings, server.url.removeprefix("http://"))
    result = subprocess.run(
        [sys.executable, "-m", "app.housekeeping", "--grace-seconds", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def still_serving(load: Load) -> None:
    """A load and a commit succeed on the same gunicorn, at the first try."""
    with httpx.Client(base_url=load.server.url, timeout=REQUEST_TIMEOUT_S) as http:
        response = http.get(load.table_path(load.append_table))
        assert response.status_code == 200, response.text
        snapshot_id, change = load._change(response.json(), "probe", 0)
        response = http.post(load.table_path(load.append_table), json=change)
        assert response.status_code == 200, response.text
    load.attempts.append(Attempt("append", "probe", ACK, 200, {load.append_table: snapshot_id}))


def wait_for_workers(server: Server, count: int, timeout: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while True:
        pids = worker_pids(server)
        if len(pids) >= count or time.monotonic() > deadline:
            return pids
        time.sleep(0.1)


def drop(load: Load) -> None:
    with httpx.Client(base_url=load.server.url, timeout=REQUEST_TIMEOUT_S) as http:
        for name in [load.append_table, *load.tx_tables]:
            http.delete(load.table_path(name), params={"purgeRequested": "true"})
        http.delete(f"{PREFIX}/namespaces/{load.namespace}")
