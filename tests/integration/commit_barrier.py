"""An HTTP proxy in front of Growler that forces two clients' commits to race, or fails commits, deterministically.

Two Spark drivers talk to Growler through it. While a round is armed, the proxy holds the first
commit (``POST .../tables/<name>``) of each of ``parties`` clients until all of them have sent
theirs: by then every client has loaded the table and built its commit on the same base. It then
forwards them one at a time, in arrival order, and records each answer: the first lands, every
other one is a commit from a stale base, which Growler must refuse (409) rather than lose or
fork. Anything else, the clients' retries included, passes straight through.

Clients are told apart by the ``X-Test-Driver`` header (a catalog ``header.*`` option).

While ``failing`` is set, the proxy instead answers every commit itself with that status (a 503, as
a gateway whose upstream went away) and never forwards it: the client cannot know whether its
commit landed (the Java REST client raises ``CommitStateUnknownException``), so it must not clean
up the files it wrote, and a job aborted that way leaves orphans for the maintenance executor.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"}


@dataclass
class Answer:
    driver: str
    status: int
    error_type: str | None
    idempotency_key: str | None = None  # of a failed commit: its retries carry the same one


@dataclass
class Round:
    parties: int
    arrived: list[str] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    turn: int = 0


class CommitBarrierProxy:
    def __init__(self, upstream: str, table: str, timeout_s: float = 120):
        self.upstream = upstream.rstrip("/")
        self.commit_suffix = f"/tables/{table}"
        self.timeout_s = timeout_s
        self.rounds: list[Round] = []
        self.passed_commits: list[Answer] = []  # commits outside the held ones (retries)
        self.failing: int | None = None
        self.failed_commits: list[Answer] = []  # commits answered ``failing``, never forwarded
        self._armed: Round | None = None
        self._condition = threading.Condition()
        self._client = httpx.Client(timeout=120)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                proxy.handle(self, body)

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _relay  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def arm(self, parties: int = 2) -> Round:
        """Hold the next commit of each of ``parties`` drivers until all have arrived."""
        with self._condition:
            self._armed = Round(parties)
            self.rounds.append(self._armed)
            return self._armed

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> httpx.Response:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_BY_HOP}
        return self._client.request(handler.command, self.upstream + handler.path, headers=headers, content=body)

    def _fail(self, handler: BaseHTTPRequestHandler, driver: str, status: int) -> None:
        """Answer the commit ``status`` with an Iceberg error body; Growler never sees it."""
        answer = Answer(driver, status, "ServiceUnavailableException", handler.headers.get("Idempotency-Key"))
        with self._condition:
            self.failed_commits.append(answer)
        message = "the test proxy answered this commit without forwarding it"
        error = {"message": message, "type": "ServiceUnavailableException", "code": status}
        content = json.dumps({"error": error}).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        is_commit = handler.command == "POST" and handler.path.split("?")[0].endswith(self.commit_suffix)
        driver = handler.headers.get("X-Test-Driver", "?")
        failing = self.failing
        if is_commit and failing is not None:
            self._fail(handler, driver, failing)
            return
        held = None
        if is_commit:
            with self._condition:
                current = self._armed
                if current is not None and driver not in current.arrived and len(current.arrived) < current.parties:
                    held, position = current, len(current.arrived)
                    current.arrived.append(driver)
                    self._condition.notify_all()
                    # every party's commit is here (or the wait timed out: the test then fails on
                    # what was recorded); then one at a time, in arrival order
                    self._condition.wait_for(
                        lambda: len(current.arrived) == current.parties and current.turn == position,
                        timeout=self.timeout_s,
                    )
                    if len(current.arrived) == current.parties and position == current.parties - 1:
                        self._armed = None
        response = None
        try:
            response = self._forward(handler, body)
            if is_commit:
                error_type = None
                if response.status_code >= 400:
                    error_type = response.json().get("error", {}).get("type")
                answer = Answer(driver, response.status_code, error_type)
                with self._condition:
                    (held.answers if held is not None else self.passed_commits).append(answer)
        finally:
            if held is not None:
                with self._condition:
                    held.turn += 1
                    self._condition.notify_all()
        handler.send_response(response.status_code)
        for key, value in response.headers.items():
            if key.lower() not in HOP_BY_HOP:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(response.content)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(response.content)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
