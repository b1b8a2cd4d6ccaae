"""Commits that never lose data: many writers against a real gunicorn, with and without faults.

Every writer is a thread with its own httpx client, talking to a gunicorn started for this module
(so killing its workers disturbs no other test). Three workloads run at the same time:

- **appends**: ``GROWLER_STRESS_WRITERS`` writers each need ``GROWLER_STRESS_APPENDS`` acknowledged
  appends to one table. An append is what clients send: add-snapshot (a globally unique id,
  parent = current main, sequence number = last + 1, the writer and append number in the summary)
  + set-snapshot-ref main, guarded by assert-ref-snapshot-id. A 409 means "not applied": the writer
  reloads and tries again with a new snapshot id (the server cannot rebase an append: the client's
  manifest list embeds its parent).
- **properties** (server-side retry): ``GROWLER_STRESS_PROPERTY_WRITERS`` writers set a property with
  a unique key on the appends' table, guarded only by assert-table-uuid. Their requirement holds
  whatever the appenders do, so a lost compare-and-set must be re-applied by the server: no 409.
- **transactions**: ``GROWLER_STRESS_TX_WRITERS`` writers each need ``GROWLER_STRESS_TX_COMMITS``
  acknowledged multi-table commits, each appending one snapshot to 2-4 of 4 tables.

Every attempt is acknowledged (2xx), rejected (409) or unknown (5xx, connection error, timeout -
only the fault runs may have those). On the final state: walking parent ids from main gives a chain
with every acknowledged snapshot exactly once and no rejected one, nothing that was never sent,
sequence numbers last..1; a transaction is in all its tables or in none; every acknowledged property
is there; the object at ``metadata-location`` is exactly what loadTable returns; and every
``*.metadata.json`` under a table's location is its current file or in its metadata-log (the
tables keep the whole log: ``write.metadata.previous-versions-max`` is set beyond the number of
commits, so "not in the log" means "orphan" rather than "trimmed"; delete-after-commit is left off
because its deletions are best-effort by design, which would blur what this test is about).

Fault runs: the same load (fewer appends and transactions per writer) while gunicorn workers are
SIGKILLed twice, and while PostgreSQL is restarted and later stopped for longer than the pool waits
(GROWLER_STRESS_PG_OUTAGE_S, 6 s). Afterwards the same invariants hold (unknown attempts may be
present or absent, never twice; a transaction still all or nothing), the sweeper (``python -m
app.housekeeping --grace-seconds 0``) leaves no orphan, and the same gunicorn master serves a load
and a commit at the first try.

Sizes: GROWLER_STRESS_WRITERS (16), GROWLER_STRESS_APPENDS (50), GROWLER_STRESS_TX_WRITERS (8),
GROWLER_STRESS_TX_COMMITS (20), GROWLER_STRESS_PROPERTY_WRITERS (4), GROWLER_STRESS_PROPERTY_COMMITS
(25); the fault runs use GROWLER_STRESS_FAULT_APPENDS (15) and GROWLER_STRESS_FAULT_TX_COMMITS (6)
per writer. After a 409 a writer backs off like Iceberg's clients (full jitter, from
GROWLER_STRESS_BACKOFF_BASE_S = 0.1 doubling up to GROWLER_STRESS_BACKOFF_CAP_S = 3). A run fails as
a hang when no commit is acknowledged for GROWLER_STRESS_STALL_S (60) or it lasts longer than
GROWLER_STRESS_TIMEOUT_S (900). GROWLER_TEST_WORKERS sets the gunicorn workers (at least 2 here).
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.api.tables_support import create_request
from tests.integration.conftest import REPO, Server, server_env, start_server, stop_server

pytestmark = pytest.mark.slow


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


WRITERS = _env_int("GROWLER_STRESS_WRITERS", 16)
APPENDS = _env_int("GROWLER_STRESS_APPENDS", 50)
TX_WRITERS = _env_int("GROWLER_STRESS_TX_WRITERS", 8)
TX_COMMITS = _env_int("GROWLER_STRESS_TX_COMMITS", 20)
PROPERTY_WRITERS = _env_int("GROWLER_STRESS_PROPERTY_WRITERS", 4)
PROPERTY_COMMITS = _env_int("GROWLER_STRESS_PROPERTY_COMMITS", 25)
FAULT_APPENDS = _env_int("GROWLER_STRESS_FAULT_APPENDS", 15)
FAULT_TX_COMMITS = _env_int("GROWLER_STRESS_FAULT_TX_COMMITS", 6)
TIMEOUT_S = _env_int("GROWLER_STRESS_TIMEOUT_S", 900)
STALL_S = _env_int("GROWLER_STRESS_STALL_S", 60)  # no commit acknowledged for this long: a hang
# longer than the server's pool timeout (GROWLER_DB_POOL_TIMEOUT_S, 5 s): requests fail meanwhile
PG_OUTAGE_S = float(os.environ.get("GROWLER_STRESS_PG_OUTAGE_S") or 6)

BACKOFF_BASE_S = float(os.environ.get("GROWLER_STRESS_BACKOFF_BASE_S") or 0.1)
BACKOFF_CAP_S = float(os.environ.get("GROWLER_STRESS_BACKOFF_CAP_S") or 3.0)
TX_TABLES = 4
PREFIX = "/v1/test"
REQUEST_TIMEOUT_S = 30.0
ACK, REJECTED, UNKNOWN = "acknowledged", "409", "unknown"
# Keep every metadata file in the log, so the orphan check is exact (see the module docstring).
KEEP_WHOLE_LOG = {"write.metadata.previous-versions-max": "1000000"}


@dataclass(frozen=True)
class Sizes:
    writers: int
    appends: int
    tx_writers: int
    tx_commits: int
    property_writers: int
    property_commits: int


FULL = Sizes(WRITERS, APPENDS, TX_WRITERS, TX_COMMITS, PROPERTY_WRITERS, PROPERTY_COMMITS)
UNDER_FAULTS = Sizes(
    WRITERS, FAULT_APPENDS, TX_WRITERS, FAULT_TX_COMMITS, PROPERTY_WRITERS, max(1, PROPERTY_COMMITS // 2)
)


@dataclass
class Attempt:
    kind: str  # "append" | "property" | "transaction"
    writer: str
    outcome: str  # ACK | REJECTED | UNKNOWN
    status: int | None  # None: no HTTP answer (connection error, timeout)
    snapshots: dict[str, int] = field(default_factory=dict)  # table -> snapshot id this attempt adds
    properties: dict[str, str] = field(default_factory=dict)  # key -> value this attempt sets
    rebased: bool = False  # acknowledged on top of a newer version than the writer had loaded
    detail: str = ""
    at: float = field(default_factory=time.monotonic)


class Aborted(Exception):
    """Another writer failed, or the run's deadline passed."""


class Load:
    """One run of the three workloads against one namespace; collects every attempt."""

    def __init__(self, server: Server, sizes: Sizes) -> None:
        self.server = server
        self.sizes = sizes
        self.namespace = "stress_" + uuid.uuid4().hex[:8]
        self.append_table = "appends"
        self.tx_tables = [f"tx{i}" for i in range(TX_TABLES)]
        self.attempts: list[Attempt] = []
        self.load_failures: list[str] = []  # loads answered 5xx or not at all
        self.snapshot_ids = itertools.count(int(time.time()) * 1_000_000)
        self.done = Counter()  # kind -> acknowledged (or unknown but seen landed) so far
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.deadline = time.monotonic() + TIMEOUT_S
        self.last_progress = time.monotonic()
        self.started = self.finished = 0.0
        self.server_cpu_s = 0.0  # of the live workers (a killed worker's share is not counted)
        self.server_commits: dict[str, float] = {}  # growler_commit* counters moved during the run

    # -- set-up ---------------------------------------------------------------------------

    @property
    def target(self) -> int:
        s = self.sizes
        return s.writers * s.appends + s.tx_writers * s.tx_commits + s.property_writers * s.property_commits

    def table_path(self, name: str) -> str:
        return f"{PREFIX}/namespaces/{self.namespace}/tables/{name}"

    def create_tables(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=REQUEST_TIMEOUT_S) as http:
            response = http.post(f"{PREFIX}/namespaces", json={"namespace": [self.namespace]})
            assert response.status_code == 200, response.text
            for name in [self.append_table, *self.tx_tables]:
                body = create_request(name, properties=KEEP_WHOLE_LOG)
                response = http.post(f"{PREFIX}/namespaces/{self.namespace}/tables", json=body)
                assert response.status_code == 200, response.text

    # -- running --------------------------------------------------------------------------

    def run(self, label: str, fault: Callable[[Load], None] | None = None) -> None:
        metrics_before = commit_metrics(self.server)
        cpu_before = {pid: cpu_seconds(pid) for pid in worker_pids(self.server)}
        try:
            self._run(fault)
        finally:
            self.finished = time.monotonic()
            cpu_after = {pid: cpu_seconds(pid) for pid in worker_pids(self.server)}
            self.server_cpu_s = sum(cpu_after[pid] - cpu_before.get(pid, 0.0) for pid in cpu_after)
            metrics_after = commit_metrics(self.server)
            self.server_commits = {
                k: v - metrics_before.get(k, 0.0) for k, v in metrics_after.items() if v != metrics_before.get(k, 0.0)
            }
            print("\n" + self.summary(label), flush=True)

    def _run(self, fault: Callable[[Load], None] | None) -> None:
        writers: list[Callable[[], None]] = []
        s = self.sizes
        writers += [lambda i=i: self._append_writer(f"a{i}") for i in range(s.writers)]
        writers += [lambda i=i: self._transaction_writer(f"x{i}") for i in range(s.tx_writers)]
        writers += [lambda i=i: self._property_writer(f"p{i}") for i in range(s.property_writers)]
        self.started = self.last_progress = time.monotonic()
        self.deadline = self.started + TIMEOUT_S
        with ThreadPoolExecutor(max_workers=len(writers), thread_name_prefix="stress") as pool:
            futures = [pool.submit(writer) for writer in writers]
            # The fault runs in this (long-lived) thread: a PostgreSQL started from a pool thread
            # would get its parent-death signal when that thread ends (see scripts/processes.py).
            try:
                if fault is not None:
                    fault(self)
            except Aborted:
                pass  # a writer failed or the deadline passed: reported below
            except BaseException:
                self.stop.set()
                raise
            done, _ = wait(
                futures, timeout=max(1.0, self.deadline + 60 - time.monotonic()), return_when=FIRST_EXCEPTION
            )
            self.stop.set()
            failures = [f.exception() for f in done if f.exception() is not None]
            real = [exc for exc in failures if not isinstance(exc, Aborted)]
            if real:
                raise real[0]
            if failures or len(done) < len(futures):
                stalled = time.monotonic() - self.last_progress
                raise AssertionError(
                    f"the load did not finish (a hang?): {dict(self.done)} of {self.target} acknowledged after"
                    f" {time.monotonic() - self.started:.0f} s, the last one {stalled:.0f} s ago"
                    f" (limits: GROWLER_STRESS_TIMEOUT_S={TIMEOUT_S}, GROWLER_STRESS_STALL_S={STALL_S})"
                )

    def check(self) -> None:
        if self.stop.is_set():
            raise Aborted("stopped")
        now = time.monotonic()
        if now > self.deadline or now - self.last_progress > STALL_S:
            self.stop.set()
            raise Aborted("deadline")

    def progress(self) -> float:
        with self._lock:
            return sum(self.done.values()) / self.target

    def wait_progress(self, fraction: float) -> None:
        while self.progress() < fraction:
            self.check()
            time.sleep(0.02)

    def _count(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.done[kind] += n
            if n:
                self.last_progress = time.monotonic()

    def _record(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)
        if attempt.outcome == ACK:
            self._count(attempt.kind)

    def _load(self, http: httpx.Client, table: str) -> dict[str, Any] | None:
        """The table as loadTable answers it; None when the catalog could not answer (fault runs)."""
        try:
            response = http.get(self.table_path(table))
        except httpx.HTTPError as exc:
            self.load_failures.append(f"{table}: {type(exc).__name__}")
            return None
        if response.status_code >= 500:
            self.load_failures.append(f"{table}: {response.status_code} {response.text[:200]}")
            return None
        assert response.status_code == 200, response.text
        return response.json()

    def _post(
        self, http: httpx.Client, path: str, body: dict[str, Any]
    ) -> tuple[str, int | None, httpx.Response | None, str]:
        try:
            response = http.post(path, json=body)
        except httpx.HTTPError as exc:
            return UNKNOWN, None, None, type(exc).__name__
        status = response.status_code
        if status in (200, 204):
            return ACK, status, response, ""
        if status == 409:
            error = response.json()["error"]
            assert error["type"] == "CommitFailedException", response.text
            return REJECTED, status, None, error["message"]
        if status >= 500:
            return UNKNOWN, status, None, response.text[:300]
        raise AssertionError(f"POST {path} answered {status}: {response.text[:1000]}")

    def _pause_after_failure(self, rng: random.Random) -> None:
        time.sleep(rng.uniform(0.05, 0.25))

    @staticmethod
    def _backoff(rng: random.Random, streak: int) -> None:
        time.sleep(rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**streak)))

    def _snapshot(self, table: dict[str, Any], writer: str, number: int) -> tuple[int, dict[str, Any], int | None]:
        metadata = table["metadata"]
        parent = main_snapshot_id(metadata)
        snapshot_id = next(self.snapshot_ids)
        body = {
            "snapshot-id": snapshot_id,
            "sequence-number": metadata["last-sequence-number"] + 1,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": f"{metadata['location']}/metadata/snap-{snapshot_id}-stress.avro",
            "summary": {"operation": "append", "writer": writer, "number": str(number)},
            "schema-id": metadata["current-schema-id"],
        }
        if parent is not None:
            body["parent-snapshot-id"] = parent
        return snapshot_id, body, parent

    def _change(self, table: dict[str, Any], writer: str, number: int) -> tuple[int, dict[str, Any]]:
        snapshot_id, snapshot_body, parent = self._snapshot(table, writer, number)
        return snapshot_id, {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot_body},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
            ],
        }

    # -- the workloads --------------------------------------------------------------------

    def _append_writer(self, writer: str) -> None:
        rng = random.Random(writer)
        done, streak, unknown = 0, 0, []
        with httpx.Client(base_url=self.server.url, timeout=REQUEST_TIMEOUT_S) as http:
            while done < self.sizes.appends:
                self.check()
                table = self._load(http, self.append_table)
                if table is None:
                    self._pause_after_failure(rng)
                    continue
                landed = [sid for sid in unknown if sid in snapshot_ids(table)]  # unanswered, but took effect
                unknown = [sid for sid in unknown if sid not in landed]
                done += len(landed)
                self._count("append", len(landed))
                if done >= self.sizes.appends:
                    break
                snapshot_id, change = self._change(table, writer, done)
                outcome, status, _, detail = self._post(http, self.table_path(self.append_table), change)
                self._record(
                    Attempt("append", writer, outcome, status, {self.append_table: snapshot_id}, detail=detail)
                )
                if outcome == ACK:
                    done, streak = done + 1, 0
                elif outcome == REJECTED:
                    streak += 1
                    self._backoff(rng, streak)
                else:
                    unknown.append(snapshot_id)
                    self._pause_after_failure(rng)

    def _transaction_writer(self, writer: str) -> None:
        rng = random.Random(writer)
        done, streak, unknown = 0, 0, []
        with httpx.Client(base_url=self.server.url, timeout=REQUEST_TIMEOUT_S) as http:
            while done < self.sizes.tx_commits:
                self.check()
                chosen = sorted(rng.sample(self.tx_tables, rng.randint(2, min(4, len(self.tx_tables)))))
                loaded = {name: self._load(http, name) for name in chosen}
                if any(table is None for table in loaded.values()):
                    self._pause_after_failure(rng)
                    continue
                for name, table in loaded.items():  # an unanswered transaction that took effect counts
                    landed = [(t, sid) for t, sid in unknown if t == name and sid in snapshot_ids(table)]
                    unknown = [entry for entry in unknown if entry not in landed]
                    done += len(landed)
                    self._count("transaction", len(landed))
                if done >= self.sizes.tx_commits:
                    break
                snapshots, changes = {}, []
                for name, table in loaded.items():
                    snapshot_id, change = self._change(table, writer, done)
                    snapshots[name] = snapshot_id
                    changes.append({"identifier": {"namespace": [self.namespace], "name": name}, **change})
                outcome, status, _, detail = self._post(
                    http, f"{PREFIX}/transactions/commit", {"table-changes": changes}
                )
                self._record(Attempt("transaction", writer, outcome, status, snapshots, detail=detail))
                if outcome == ACK:
                    done, streak = done + 1, 0
                elif outcome == REJECTED:
                    streak += 1
                    self._backoff(rng, streak)
                else:
                    # remember one table of it: seen there means it is everywhere (checked at the end)
                    first = next(iter(snapshots.items()))
                    unknown.append(first)
                    self._pause_after_failure(rng)

    def _property_writer(self, writer: str) -> None:
        rng = random.Random(writer)
        done = 0
        with httpx.Client(base_url=self.server.url, timeout=REQUEST_TIMEOUT_S) as http:
            while done < self.sizes.property_commits:
                self.check()
                table = self._load(http, self.append_table)
                if table is None:
                    self._pause_after_failure(rng)
                    continue
                key, value = f"stress.{writer}.{done}.{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
                body = {
                    "requirements": [{"type": "assert-table-uuid", "uuid": table["metadata"]["table-uuid"]}],
                    "updates": [{"action": "set-properties", "updates": {key: value}}],
                }
                outcome, status, answer, detail = self._post(http, self.table_path(self.append_table), body)
                rebased = False
                if outcome == ACK:
                    # the version the server applied it to is the last entry of the new metadata-log
                    applied_to = answer.json()["metadata"]["metadata-log"][-1]["metadata-file"]
                    rebased = applied_to != table["metadata-location"]
                    done += 1
                self._record(
                    Attempt(
                        "property", writer, outcome, status, properties={key: value}, rebased=rebased, detail=detail
                    )
                )
                if outcome == UNKNOWN:
                    self._pause_after_failure(rng)
                else:
                    time.sleep(rng.uniform(0, 0.02))

    # -- reporting ------------------------------------------------------------------------

    def count(self, kind: str, outcome: str) -> int:
        return sum(1 for a in self.attempts if a.kind == kind and a.outcome == outcome)

    def summary(self, label: str) -> str:
        parts = []
        for kind in ("append", "transaction", "property"):
            counts = "/".join(str(self.count(kind, outcome)) for outcome in (ACK, REJECTED, UNKNOWN))
            parts.append(f"{kind} {counts}")
        rebased = sum(1 for a in self.attempts if a.rebased)
        statuses = Counter(a.status for a in self.attempts if a.outcome == UNKNOWN)
        server = ", ".join(f"{k} {v:g}" for k, v in sorted(self.server_commits.items())) or "no /metrics"
        return (
            f"[stress {label}] {self.finished - self.started:.1f} s; acknowledged/409/unknown: {', '.join(parts)};"
            f" property commits rebased on the server: {rebased}; unknown by status: {dict(statuses)};"
            f" failed loads: {len(self.load_failures)}; server: {server}; worker CPU {self.server_cpu_s:.0f} s"
        )


# -- reading the outcome ----------------------------------------------------------------------


def main_snapshot_id(metadata: dict[str, Any]) -> int | None:
    ref = (metadata.get("refs") or {}).get("main")
    return ref["snapshot-id"] if ref else None


def snapshot_ids(table: dict[str, Any]) -> set[int]:
    return {s["snapshot-id"] for s in table["metadata"].get("snapshots") or []}


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
    """One housekeeping round with no grace, as an operator would run it (``make sweep``)."""
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


def worker_pids(server: Server) -> set[int]:
    children: set[int] = set()
    for task in Path(f"/proc/{server.process.pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            children.update(int(pid) for pid in (task / "children").read_text().split())
    return children


def commit_metrics(server: Server) -> dict[str, float]:
    """growler_commits_total / growler_commit_retries_total by labels, summed over the workers."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        response = httpx.get(f"{server.url}/metrics", timeout=REQUEST_TIMEOUT_S)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    values = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in ("growler_commits_total", "growler_commit_retries_total"):
                short = "retries" if "retries" in sample.name else "commits"
                key = ":".join([short, *(sample.labels[k] for k in sorted(sample.labels))])
                values[key] = sample.value
    return values


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stress_server(settings, app, tmp_path_factory) -> Iterator[Server]:
    """A gunicorn of its own (the fault runs kill its workers), configured as in production.

    Unlike the other test servers it does not validate its responses against the yaml: that
    costs far more than the commit itself once the metadata holds hundreds of snapshots, and
    the api and conformance tests cover it.
    """
    workers = max(2, _env_int("GROWLER_TEST_WORKERS", 2))
    running = start_server(
        settings,
        tmp_path_factory.mktemp("stress-gunicorn"),
        {"GROWLER_VALIDATE_RESPONSES": "false", "GROWLER_WORKERS": str(workers)},
    )
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def store(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


# -- the runs -------------------------------------------------------------------------------


def test_no_acknowledged_commit_is_lost(stress_server, store, services):
    load = Load(stress_server, FULL)
    load.create_tables()
    load.run("no faults")
    verify(load, store, services, strict=True)
    # The server re-applies what a lost race did not invalidate, so these commits - racing 16
    # appenders on one table - mostly succeed without a client retry (the "mostly"):
    # the server's retries are bounded, and a commit that loses every race gets a clean 409
    # (verify() has checked that no refused property was applied).
    properties = [a for a in load.attempts if a.kind == "property"]
    refused = [a.detail for a in properties if a.outcome == REJECTED]
    assert len(refused) <= 0.1 * len(properties), f"{len(refused)} property commits refused: {refused[:3]}"
    drop(load)


def test_killed_workers_lose_nothing(stress_server, store, services, settings):
    expected_workers = len(worker_pids(stress_server))
    killed: list[tuple[int, float]] = []

    def kill_workers(load: Load) -> None:
        for fraction in (0.3, 0.6):
            load.wait_progress(fraction)
            victim = random.choice(sorted(worker_pids(stress_server)))
            os.kill(victim, signal.SIGKILL)
            killed.append((victim, time.monotonic()))

    load = Load(stress_server, UNDER_FAULTS)
    load.create_tables()
    load.run("SIGKILL of workers", kill_workers)
    print(f"[stress SIGKILL] killed workers {[pid for pid, _ in killed]}")

    assert len(killed) == 2 and stress_server.process.poll() is None
    pids = wait_for_workers(stress_server, expected_workers)
    assert len(pids) == expected_workers and not pids & {pid for pid, _ in killed}
    after = [a for a in load.attempts if a.outcome == ACK and a.at > killed[-1][1]]
    assert after, "nothing was acknowledged after the last kill"
    still_serving(load)
    print(f"[stress SIGKILL] sweeper: {sweep(settings, stress_server)}")
    verify(load, store, services, strict=False)
    drop(load)


def test_postgres_restart_loses_nothing(stress_server, store, services, settings):
    """A quick restart (the pool reconnects) and an outage longer than the pool's timeout (503s)."""
    if services.postgres is None:
        pytest.skip("PostgreSQL is external: it cannot be restarted by the tests")
    postgres = services.postgres
    back: list[float] = []

    def restart_postgres(load: Load) -> None:
        load.wait_progress(0.3)
        postgres.restart()
        back.append(time.monotonic())
        load.wait_progress(0.6)
        postgres.stop()
        time.sleep(PG_OUTAGE_S)
        postgres.start()
        back.append(time.monotonic())

    load = Load(stress_server, UNDER_FAULTS)
    load.create_tables()
    try:
        load.run(f"PostgreSQL restarted, then down {PG_OUTAGE_S:g} s", restart_postgres)
    finally:
        if not postgres.running:
            postgres.start()

    assert len(back) == 2 and stress_server.process.poll() is None
    after = [a for a in load.attempts if a.outcome == ACK and a.at > back[-1]]
    assert after, "nothing was acknowledged after PostgreSQL came back"
    still_serving(load)
    print(f"[stress PostgreSQL] sweeper: {sweep(settings, stress_server)}")
    verify(load, store, services, strict=False)
    drop(load)
