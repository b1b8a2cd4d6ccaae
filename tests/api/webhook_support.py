"""A webhook receiver for the push-delivery tests (tests/api/test_event_webhooks.py, the audit
trail's export in tests/api/test_audit.py): what it answers request after request, and what it
received once it acknowledged."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scripts.processes import free_port


class Script:
    """What the receiver answers, request after request: a status, or "hang" (past the timeout)."""

    def __init__(self, *answers: int | str) -> None:
        self.answers = list(answers)
        self.received: list[tuple[dict, bytes, str]] = []  # (event, body, signature) of each acknowledged one
        self.requests = 0
        self.hosts: list[str] = []  # the Host header of each request
        self.release = threading.Event()
        self.changed = threading.Condition()

    def wait_until(self, condition, timeout_s: float = 40.0) -> None:
        """Until ``condition()`` holds over what was received: woken by each acknowledged request."""
        with self.changed:
            assert self.changed.wait_for(condition, timeout_s), "timed out waiting for the deliveries"

    def next(self) -> int | str:
        self.requests += 1
        return self.answers.pop(0) if self.answers else 204


def serve_receiver() -> Iterator[tuple[str, dict[str, Script]]]:
    scripts: dict[str, Script] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            script = scripts[self.path]
            script.hosts.append(self.headers.get("Host", ""))
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
    """Until ``condition()`` holds, for state the receiver is not told of (dead letters in the
    catalog): looked at again every 0.1 s, with a deadline, never asserted on time."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the deliveries"
        time.sleep(0.1)
