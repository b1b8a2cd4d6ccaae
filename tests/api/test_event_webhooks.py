"""Push delivery to webhooks (app/publisher.py), configured through the management API: a receiver
that fails, times out and recovers gets every event once acknowledged, in order, signed; a
receiver that keeps failing leaves dead letters an administrator lists and replays; the example
receiver (examples/webhook_receiver.py) verifies signatures as written."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from scripts.processes import free_port
from tests.api.tables_support import PREFIX, append, create_request, table_url, tables_url

pytestmark = pytest.mark.usefixtures("clean_catalog")
SINKS = "/management/v1/event-sinks"
SECRET = "a-webhook-secret-of-some-length"
ROOT = Path(__file__).resolve().parents[2]


class Script:
    """What the receiver answers, request after request: a status, or "hang" (past the timeout)."""

    def __init__(self, *answers: int | str) -> None:
        self.answers = list(answers)
        self.received: list[tuple[dict, bytes, str]] = []  # (event, body, signature) of each acknowledged one
        self.requests = 0
        self.release = threading.Event()
        self.changed = threading.Condition()

    def next(self) -> int | str:
        self.requests += 1
        return self.answers.pop(0) if self.answers else 204


@pytest.fixture
def receiver() -> Iterator[tuple[str, dict[str, Script]]]:
    scripts: dict[str, Script] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            script = scripts[self.path]
            answer = script.next()
            if answer == "hang":
                script.release.wait(8)  # past the publisher's 5 s timeout
                return
            if answer == 204:
                with script.changed:
                    signature = self.headers.get("X-Growler-Signature", "")
                    script.received.append((json.loads(body), body, signature))
                    script.changed.notify_all()
            self.send_response(int(answer))
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", scripts
    for script in scripts.values():
        script.release.set()
    server.shutdown()


def wait_for(condition, timeout_s: float = 40.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the deliveries"
        time.sleep(0.1)


def changes(client) -> list[dict]:
    """Three changes of the warehouse; their events as the feed serves them."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    assert append(client, table_url("t"), 7, 1, None).status_code == 200
    return client.post(f"{PREFIX}/events", json={}).json()["events"]


def test_a_webhook_that_fails_times_out_and_recovers_gets_every_event_in_order(client, receiver):
    url, scripts = receiver
    scripts["/ok"] = script = Script(500, "hang", 503)  # then 204 from the fourth request on
    body = {"name": "hook", "kind": "webhook", "url": f"{url}/ok", "secret": SECRET, "max-attempts": 5}
    body["filters"] = {"warehouses": ["test"]}
    created = client.post(SINKS, json=body)
    assert created.status_code == 201, created.text
    assert created.json()["signed"] is True and "secret" not in created.json()
    events = changes(client)
    wait_for(lambda: len(script.received) >= 3)
    delivered = [event for event, _, _ in script.received]
    for _, raw, signature in script.received:  # signed with the sink's secret, over the body
        assert signature == "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert [e["id"] for e in delivered] == [e["event-id"] for e in events]  # in order, each once
    first = delivered[0]
    assert (first["specversion"], first["source"], first["type"]) == (
        "1.0",
        "/growler/test",
        "org.apache.iceberg.catalog.create-namespace",
    )
    commit = delivered[2]
    assert commit["subject"] == "db.t" and commit["datacontenttype"] == "application/json"
    snapshot = next(u for u in commit["data"]["operation"]["updates"] if u["action"] == "add-snapshot")["snapshot"]
    assert snapshot["snapshot-id"] == 7 and [int(e["sequence"]) for e in delivered] == sorted(
        int(e["sequence"]) for e in delivered
    )
    assert script.requests == 6  # three failures (500, the timeout, 503), then one request per event
    listed = client.get(SINKS).json()["event-sinks"]
    assert [s["name"] for s in listed] == ["hook"]
    assert client.get(f"{SINKS}/hook/dead-letters").json() == {"dead-letters": []}
    assert client.delete(f"{SINKS}/hook").status_code == 204


def test_dead_letters_are_listed_and_replayed(client, receiver):
    url, scripts = receiver
    scripts["/down"] = script = Script(*[500] * 6)  # two attempts per event: three events die
    body = {"name": "down", "kind": "webhook", "url": f"{url}/down", "secret": SECRET, "max-attempts": 2}
    assert client.post(SINKS, json=body).status_code == 201
    events = changes(client)
    wait_for(lambda: len(client.get(f"{SINKS}/down/dead-letters").json()["dead-letters"]) == 3)
    dead = client.get(f"{SINKS}/down/dead-letters").json()["dead-letters"]
    assert [d["event-id"] for d in dead] == [e["event-id"] for e in events]
    assert {(d["attempts"], d["last-error"]) for d in dead} == {(2, "HTTP 500")}
    assert script.received == []
    assert client.post(f"{SINKS}/down/dead-letters/replay").status_code == 204  # the receiver is back
    wait_for(lambda: client.get(f"{SINKS}/down/dead-letters").json()["dead-letters"] == [])
    assert [event["id"] for event, _, _ in script.received] == [e["event-id"] for e in events]


def test_sinks_are_for_administrators_and_bad_ones_are_400(client, principals):
    caller = principals.new("not-admin")
    assert caller.client.post(SINKS, json={"name": "x", "kind": "webhook", "url": "http://h/"}).status_code == 403
    assert caller.client.get(SINKS).status_code == 403
    for bad in (
        {"name": "x", "kind": "webhook", "url": "ftp://h/"},
        {"name": "x", "kind": "nats", "url": "http://h/"},
        {"name": "x", "kind": "nats", "url": "nats://h:4222", "secret": SECRET},
        {"name": "env-x", "kind": "webhook", "url": "http://h/"},
        {"name": "x", "kind": "kafka", "url": "http://h/"},
    ):
        assert client.post(SINKS, json=bad).status_code == 400, bad
    assert client.get(f"{SINKS}/none/dead-letters").status_code == 404


def test_the_example_receiver_verifies_signatures(client):
    port = free_port()
    env = {"GROWLER_WEBHOOK_SECRET": SECRET, "PATH": "/usr/bin:/bin"}
    example = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "webhook_receiver.py"), str(port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        body = {"name": "example", "kind": "webhook", "url": f"http://127.0.0.1:{port}/", "secret": SECRET}
        assert client.post(SINKS, json=body).status_code == 201
        changes(client)
        lines = [example.stdout.readline().split() for _ in range(3)]
        assert [line[1] for line in lines] == ["create-namespace", "create-table", "update-table"]
        assert lines[2][2] == "db.t"
        forged = urllib.request.Request(
            f"http://127.0.0.1:{port}/", data=b"{}", headers={"X-Growler-Signature": "sha256=00"}, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=5)
        assert refused.value.code == 401
    finally:
        example.kill()
        example.wait()
