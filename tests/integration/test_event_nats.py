"""Push delivery to NATS JetStream (app/publisher/service.py) through a real gunicorn server and Debian's
nats-server: committers write to three tables while the worker holding the publisher's lease
and another worker are SIGKILLed and nats-server is stopped and started again mid-stream. Every
event of the feed reaches JetStream, each table's events in their feed order, and a repeat only
ever carries the same event id; the example consumer (examples/nats_consumer.py) reads them all.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from scripts.processes import free_port
from tests.api.tables_support import create_request
from tests.fault_support import process_tree
from tests.integration.conftest import REPO
from tests.integration.proc_support import wait_for

pytestmark = pytest.mark.slow  # waits on restarts or builds: make test runs it in the slow part

NATS_BIN = "/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else "nats-server"


class NatsServer:
    def __init__(self, directory: Path) -> None:
        self.port, self.directory = free_port(), directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [NATS_BIN, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.directory)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                with __import__("socket").create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                assert time.monotonic() < deadline, "nats-server did not start"
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


@pytest.fixture
def nats_server(tmp_path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "jetstream")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gunicorn_publishes():
    """The suite's in-process apps publish too (they share the database; the api tests build many):
    stopped here, so the lease goes to a gunicorn worker, the process this test kills; started
    again afterwards."""
    from app.publisher.service import Publisher

    stopped = Publisher.running()
    for publisher in stopped:
        publisher.stop()
    yield
    for publisher in stopped:
        publisher.start()


def lease_holder_pid(database_url: str) -> int | None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT holder FROM event_publisher_lease WHERE expires_at > now()").fetchone()
    return int(row[0].split(":")[1]) if row else None


async def read_stream(url: str, subjects: str, expected: set[str]) -> list[tuple[str, dict]]:
    """Every message on ``subjects`` until each of ``expected`` event ids came at least once (a
    fetch that finds nothing in time is not the end: on a busy machine it may come late)."""
    import nats

    connection = await nats.connect(url)
    try:
        subscription = await connection.jetstream().pull_subscribe(subjects, durable=f"t{uuid.uuid4().hex[:8]}")
        found: list[tuple[str, dict]] = []
        deadline = time.monotonic() + 120
        while not expected <= {message_id for message_id, _ in found} and time.monotonic() < deadline:
            try:
                messages = await subscription.fetch(200, timeout=2)
            except (TimeoutError, nats.errors.TimeoutError):  # nats-py raises either
                continue
            for message in messages:
                found.append((message.headers.get("Nats-Msg-Id"), json.loads(message.data)))
                await message.ack()
        try:  # then whatever else is there (a foreign event would be a failure)
            for message in await subscription.fetch(200, timeout=2):
                found.append((message.headers.get("Nats-Msg-Id"), json.loads(message.data)))
                await message.ack()
        except (TimeoutError, nats.errors.TimeoutError):
            pass
        return found
    finally:
        await connection.close()


def test_every_event_reaches_jetstream_through_worker_kills_and_a_nats_restart(
    server, settings, nats_server, gunicorn_publishes
):
    namespace = f"feed{uuid.uuid4().hex[:8]}"
    base = f"{server.url}/v1/{server.warehouse}"
    with httpx.Client(timeout=60) as http:
        made = http.post(
            f"{server.url}/management/v1/event-sinks", json={"name": namespace, "kind": "nats", "url": nats_server.url}
        )
        assert made.status_code == 201, made.text
        assert http.post(f"{base}/namespaces", json={"namespace": [namespace]}).status_code == 200
        tables = ["a", "b", "c"]
        for table in tables:
            assert http.post(f"{base}/namespaces/{namespace}/tables", json=create_request(table)).status_code == 200

    stop = threading.Event()
    acknowledged: list[str] = []

    def commit(table: str) -> None:
        with httpx.Client(timeout=60) as http:
            number = 0
            while not stop.is_set():
                number += 1
                body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"n": str(number)}}]}
                try:
                    response = http.post(f"{base}/namespaces/{namespace}/tables/{table}", json=body)
                except httpx.HTTPError:
                    continue  # a killed worker's connection: its outcome is in the feed or not
                if response.status_code == 200:
                    acknowledged.append(response.json()["metadata-location"])

    # two committers per table: across the workers they lose compare-and-sets, which the server retries
    committers = [threading.Thread(target=commit, args=(table,)) for table in tables * 2]
    for thread in committers:
        thread.start()
    try:
        wait_for(lambda: lease_holder_pid(settings.database_url) in process_tree(server.process.pid), "lease", 30)
        wait_for(lambda: len(acknowledged) >= 5, "commits", 60)
        holder = lease_holder_pid(settings.database_url)
        workers = [pid for pid in process_tree(server.process.pid) if pid != server.process.pid]
        for pid in {holder, *workers[:1]}:
            os.kill(pid, signal.SIGKILL)  # the publisher mid-delivery and a committer's worker
        wait_for(lambda: lease_holder_pid(settings.database_url) not in (None, holder), "a new lease holder", 40)
        count = len(acknowledged)
        nats_server.stop()  # JetStream gone mid-stream: the sink waits, commits go on
        wait_for(lambda: len(acknowledged) >= count + 5, "commits while NATS is down", 60)
        nats_server.start()
        count = len(acknowledged)
        wait_for(lambda: len(acknowledged) >= count + 5, "commits after NATS is back", 60)
    finally:
        stop.set()
        for thread in committers:
            thread.join()

    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT e.event_id::text, e.name, e.position, e.operation->>'metadata-location' FROM change_event e"
            " JOIN warehouse w ON w.id = e.stream WHERE w.name = %s AND e.namespace = %s ORDER BY e.position",
            (server.warehouse, [namespace]),
        ).fetchall()
        end = rows[-1][2]

        def delivered() -> bool:
            position = conn.execute(
                "SELECT c.position FROM event_sink_cursor c JOIN event_sink s ON s.id = c.sink_id"
                " JOIN warehouse w ON w.id = c.stream WHERE s.name = %s AND w.name = %s",
                (namespace, server.warehouse),
            ).fetchone()
            return position is not None and position[0] >= end

        wait_for(delivered, "the sink's cursor at the end of the feed", 60)
    # every acknowledged commit has its event, one per version, in the order of the table's metadata
    # log (a commit cut by a SIGKILL has one exactly if it took effect)
    assert set(acknowledged) <= {row[3] for row in rows if row[3]}
    with httpx.Client(timeout=60) as http:
        for table in tables:
            loaded = http.get(f"{base}/namespaces/{namespace}/tables/{table}").json()
            log = [entry["metadata-file"] for entry in loaded["metadata"]["metadata-log"]]
            # the log keeps the last 100 previous versions (write.metadata.previous-versions-max)
            versions = [*log, loaded["metadata-location"]][1:]
            events = [row[3] for row in rows if row[1] == table and row[3]]
            assert events[-len(versions) :] == versions and len(set(events)) == len(events), table
    subjects = f"growler.{server.warehouse}.{namespace}.>"
    received = asyncio.run(read_stream(nats_server.url, subjects, {row[0] for row in rows}))
    ids = [message_id for message_id, _ in received]
    assert all(message_id == event["id"] for message_id, event in received)  # a repeat has the same id
    assert set(ids) == {row[0] for row in rows}  # none missing, none foreign
    for table in tables:  # per table: the feed's order (first delivery of each id)
        expected = [row[0] for row in rows if row[1] == table]
        got = list(dict.fromkeys(event["id"] for _, event in received if event["subject"] == f"{namespace}.{table}"))
        assert got == expected, table

    example = subprocess.run(
        [sys.executable, str(REPO / "examples" / "nats_consumer.py"), nats_server.url, subjects, "--drain"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert example.returncode == 0, example.stderr
    lines = example.stdout.splitlines()
    assert len(lines) == len(rows) and lines[0].split()[1] == "create-namespace"
    with httpx.Client(timeout=60) as http:
        assert http.delete(f"{server.url}/management/v1/event-sinks/{namespace}").status_code == 204


def test_the_audit_trail_reaches_jetstream_on_subjects_of_its_own(settings, nats_server):
    """A NATS sink of the audit trail only (docs/audit.md "Export"): each record written after the
    sink was made reaches ``growler._audit.<decision>``, once, in order, as its own CloudEvent."""
    import dataclasses

    from app.edge.factory import create_app
    from tests.conftest import authenticated

    app = authenticated(create_app(dataclasses.replace(settings, audit_trail=True)))
    client = app.test_client()
    name = f"audit-nats-{uuid.uuid4().hex[:6]}"
    body = {"name": name, "kind": "nats", "url": nats_server.url, "filters": {"audit": True, "changes": False}}
    assert client.post("/management/v1/event-sinks", json=body).status_code == 201
    try:
        rids = [uuid.uuid4().hex for _ in range(3)]
        for rid in rids[:2]:
            assert client.get("/v1/test/namespaces", headers={"X-Request-Id": rid}).status_code == 200
        refused = app.anonymous_client().get("/v1/test/namespaces", headers={"X-Request-Id": rids[2]})
        assert refused.status_code == 401
        with psycopg.connect(settings.database_url) as conn:
            ids = dict(
                conn.execute("SELECT request_id, id FROM audit_record WHERE request_id = ANY(%s)", (rids,)).fetchall()
            )
        expected = {f"audit-{ids[rid]}" for rid in rids}

        def delivered() -> bool:  # the stream exists once the publisher sent to it
            with psycopg.connect(settings.database_url) as conn:
                row = conn.execute(
                    "SELECT c.id FROM audit_sink_cursor c JOIN event_sink s ON s.id = c.sink_id WHERE s.name = %s",
                    (name,),
                ).fetchone()
            return row is not None and row[0] >= max(ids.values())

        wait_for(delivered, "the audit records delivered to JetStream", 120)
        found = asyncio.run(read_stream(nats_server.url, "growler._audit.>", expected))
        ours = [(message_id, event) for message_id, event in found if message_id in expected]
        assert [event["data"]["request-id"] for _, event in ours] == rids
        assert [event["type"] for _, event in ours][:2] == ["org.growler.audit.allowed"] * 2
        assert all(event["source"] == "/growler/audit" for _, event in found)
        assert len({message_id for message_id, _ in ours}) == len(ours) == 3  # each once
    finally:
        assert client.delete(f"/management/v1/event-sinks/{name}").status_code == 204
