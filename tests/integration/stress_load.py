"""The commit stress load of test_concurrency.py: writers of appends, properties and multi-table
transactions against a gunicorn, each attempt recorded as acknowledged, rejected or unknown (the
module docstring of test_concurrency.py says what runs and why), and what it reads of the server."""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.api.tables_support import create_request
from tests.integration.conftest import Server


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
# Hang guards, not speeds: a run fails as a hang when no commit is acknowledged for STALL_S (the
# load's own progress), or - much later, whatever the machine's speed - after TIMEOUT_S in all.
# A busy machine (another build beside the suite) may take several times as long as a quiet one.
TIMEOUT_S = _env_int("GROWLER_STRESS_TIMEOUT_S", 3600)
STALL_S = _env_int("GROWLER_STRESS_STALL_S", 60)  # no commit acknowledged for this long: a hang
# longer than the server's pool timeout (GROWLER_DB_POOL_TIMEOUT_S, 5 s): requests fail meanwhile
PG_OUTAGE_S = float(os.environ.get("GROWLER_STRESS_PG_OUTAGE_S") or 6)

BACKOFF_BASE_S = float(os.environ.get("GROWLER_STRESS_BACKOFF_BASE_S") or 0.1)
BACKOFF_CAP_S = float(os.environ.get("GROWLER_STRESS_BACKOFF_CAP_S") or 3.0)
TX_TABLES = 4
PREFIX = "/v1/test"
# A request's answer is waited for this long before it counts as unknown (which the runs without
# faults refuse): a hang guard, well past what a commit takes on a busy machine.
REQUEST_TIMEOUT_S = 120.0
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


def main_snapshot_id(metadata: dict[str, Any]) -> int | None:
    ref = (metadata.get("refs") or {}).get("main")
    return ref["snapshot-id"] if ref else None


def snapshot_ids(table: dict[str, Any]) -> set[int]:
    return {s["snapshot-id"] for s in table["metadata"].get("snapshots") or []}


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
