"""Which Growler modules one append commit passes, and how often it is handed from one to another.

``python -m scripts.trace_handoffs`` starts an embedded PostgreSQL and SeaweedFS (as the tests
do), builds the app (GROWLER_AUTH=none, loopback), creates a table, commits one warm-up append
and then traces the next one with ``sys.setprofile``: from the moment the dispatcher calls the
``updateTable`` handler (``handlers/tables.py``'s ``update_table``) until it returns, in that
thread and in the metadata writers' threads the commit hands its files to.

- a *module* is a Growler module (``app.*``, ``handlers.*``, ``storage.*``) in which some
  function ran;
- a *hand-off* is a distinct (caller module, callee module) pair of a call from one Growler
  module into another (the caller being the nearest Growler frame below the callee); ``calls``
  counts every such crossing.

Issue 48 measured 28 modules and 67 hand-offs on the flat floor. Prints JSON (``--list`` adds the
modules and hand-offs themselves, ``--chain`` the functions crossing each hand-off and how often):
``modules`` counts every Growler module, ``working_modules`` those outside the pure rules and the
ground floor (``app.rules``, ``app.ground``: no I/O; what of them a commit runs is its rules -
requirements, updates, serialisation - and small values).
2026-12-06, after issue 48's third pass: 32 modules (14 working), 54 hand-offs; before it 35
(18), 59. Those counts include the warm-up append (the pools' threads were traced from the start):
traced alone, as this script now does, the same code passes 32 modules (14), 52 hand-offs, 126
calls. 2026-12-07, after the fourth pass (the new metadata file's location in one step): 32
(14), 51, 125.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

OURS = ("app.", "handlers.", "storage.")
PURE = ("app.rules.", "app.ground.")  # no I/O: counted apart (``working_modules`` leaves them out)
HANDLER = ("update_table", "handlers/tables.py")
BUCKET = "growler-trace"
ACCESS_KEY, SECRET_KEY = "growler-trace", "growler-trace-secret"


class Trace:
    """The profile function: records only while a traced handler runs (``recording``), in the
    handler's thread and the metadata writers' (their names start with ``metadata-write``), and
    only a handler called while ``armed``: the pools' threads carry the profile from the start
    (``threading.setprofile``), so the warm-up append would be recorded too (it was, until
    2026-12-07: every call counted twice, and the warm-up's first parse of the document added
    its hand-offs)."""

    def __init__(self) -> None:
        self.armed = False
        self.recording = False
        self.handler_frame: FrameType | None = None
        self.modules: set[str] = set()
        self.handoffs: set[tuple[str, str]] = set()
        # (caller module, callee module) -> {(caller function, callee function): calls}
        self.chain: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if (
                self.armed
                and not self.recording
                and code.co_name == HANDLER[0]
                and code.co_filename.endswith(HANDLER[1])
            ):
                self.recording, self.handler_frame = True, frame
            if not self.recording or not self._traced_thread(frame):
                return
            module = frame.f_globals.get("__name__", "")
            if not module.startswith(OURS):
                return
            caller_frame = self._nearest_ours(frame.f_back)
            caller = caller_frame.f_globals.get("__name__", "") if caller_frame is not None else None
            with self._lock:
                self.modules.add(module)
                if caller_frame is not None and caller != module:
                    self.handoffs.add((caller, module))
                    self.calls += 1
                    functions = (_function(caller_frame), _function(frame))
                    pairs = self.chain.setdefault((caller, module), {})
                    pairs[functions] = pairs.get(functions, 0) + 1
        elif event == "return" and frame is self.handler_frame:
            self.recording, self.handler_frame = False, None

    def _traced_thread(self, frame: FrameType) -> bool:
        name = threading.current_thread().name
        return name.startswith("metadata-write") or self._within_handler(frame)

    def _within_handler(self, frame: FrameType | None) -> bool:
        while frame is not None:
            if frame is self.handler_frame:
                return True
            frame = frame.f_back
        return False

    @staticmethod
    def _nearest_ours(frame: FrameType | None) -> FrameType | None:
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith(OURS):
                return frame
            frame = frame.f_back
        return None


def _function(frame: FrameType) -> str:
    """The function a frame runs, with its class where the code has one (``Class.method``)."""
    return getattr(frame.f_code, "co_qualname", frame.f_code.co_name)


@contextmanager
def backing_services(root: Path) -> Iterator[tuple[str, str]]:
    """(database url, S3 endpoint) of an embedded PostgreSQL and SeaweedFS, stopped after."""
    from scripts.postgres import EmbeddedPostgres
    from scripts.processes import free_port
    from scripts.seaweedfs import EmbeddedS3

    postgres = EmbeddedPostgres(root / "postgres", free_port(), fast=True)
    s3 = EmbeddedS3(root / "s3", free_port(), ACCESS_KEY, SECRET_KEY)
    postgres.start()
    try:
        s3.start()
        try:
            yield postgres.url, s3.endpoint
        finally:
            s3.stop()
    finally:
        postgres.stop()


def trace_one_append(database_url: str, endpoint: str) -> Trace:
    from app.edge.auth.config import AuthSettings
    from app.edge.factory import create_app
    from app.ground.settings import S3Settings, Settings
    from bench import bodies
    from storage.objects import S3ObjectStore

    s3 = S3Settings(
        endpoint=endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region="us-east-1", path_style=True
    )
    S3ObjectStore(s3).ensure_bucket(BUCKET)
    settings = Settings(
        database_url=database_url,
        warehouse="trace",
        warehouse_location=f"s3://{BUCKET}/",
        s3=s3,
        storage_credentials_mode="static",
    )
    trace = Trace()
    threading.setprofile(trace)  # the dispatcher's pools and the metadata writers start later
    app = create_app(settings, AuthSettings(mode="none"))
    client = app.test_client()
    assert client.post("/v1/trace/namespaces", json={"namespace": ["db"]}).status_code == 200
    created = client.post("/v1/trace/namespaces/db/tables", json=bodies.create_table("t"))
    assert created.status_code == 200, created.text
    location = created.json()["metadata"]["location"]
    rng = random.Random(48)
    parent = None
    for sequence_number in (1, 2):  # the first warms every cache; the second is traced
        snapshot = bodies.snapshot_id(rng)
        body = bodies.append(location, snapshot, sequence_number, parent)
        if sequence_number == 2:
            trace.armed = True
            sys.setprofile(trace)
        answer = client.post("/v1/trace/namespaces/db/tables/t", json=body)
        sys.setprofile(None)
        trace.armed = False
        assert answer.status_code == 200, answer.text
        parent = snapshot
    threading.setprofile(None)  # type: ignore[arg-type]
    return trace


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the modules and hand-offs too")
    parser.add_argument(
        "--chain",
        action="store_true",
        help="list, for every hand-off, the functions that cross it (caller -> callee: calls)",
    )
    options = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="growler-trace-"))
    try:
        with backing_services(root) as (database_url, endpoint):
            trace = trace_one_append(database_url, endpoint)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    working = sorted(module for module in trace.modules if not module.startswith(PURE))
    report: dict[str, Any] = {
        "modules": len(trace.modules),
        "working_modules": len(working),
        "handoffs": len(trace.handoffs),
        "calls": trace.calls,
    }
    if options.list:
        report["module_list"] = sorted(trace.modules)
        report["working_module_list"] = working
        report["handoff_list"] = [f"{a} -> {b}" for a, b in sorted(trace.handoffs)]
    if options.chain:
        report["chain"] = {
            f"{a} -> {b}": [f"{f} -> {g}: {n}" for (f, g), n in sorted(trace.chain[(a, b)].items())]
            for a, b in sorted(trace.chain)
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
