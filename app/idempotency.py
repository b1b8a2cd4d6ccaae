"""Idempotency-Key semantics for mutating operations.

The first request with a key runs; its final response - 2xx, or a deterministic 4xx such as a
409 - is kept for the key's lifetime, and a retry with the same key gets it back without running
again. A concurrent duplicate waits for the first to finish and then gets the same answer. A 5xx
is not kept: the key is released so a retry runs. Reusing a key for a different request is 400
(the client error every mutating operation declares). "Same request" means the same method,
path, query and body, and the same value of every header that changes the outcome (today the
access delegation a client asks for): ``fingerprint``.

A kept answer never holds credentials. The caller of ``run_once`` passes what to keep (the
answer with vended secrets removed) next to what to send, and vends them anew on a replay, for
the caller that replays.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from app.ground import metrics
from app.ground.callers import Principal
from app.ground.errors import BadRequest, CatalogError, ServiceUnavailable
from storage.idempotency import IdempotencyRepository

# How long a running request may hold its key before another attempt may take it over: longer
# than any request is allowed to run (gunicorn's timeout is 60 s).
LEASE_SECONDS = 120
WAIT_FOR_FIRST_S = 30.0
POLL_S = 0.05


@dataclass(frozen=True)
class StoredResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def iso8601_duration(seconds: int) -> str:
    """``PT30M`` style, as ``idempotency-key-lifetime`` is advertised."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return "PT" + "".join(f"{v}{u}" for v, u in ((hours, "H"), (minutes, "M"), (secs, "S")) if v) if seconds else "PT0S"


def parse_key(raw: str) -> str:
    try:
        return str(uuid.UUID(raw))
    except ValueError as exc:
        raise BadRequest("Idempotency-Key must be a UUID (UUIDv7 recommended)") from exc


def owner(principal: Principal | None) -> str:
    """Whose keys these are: each principal's keys are its own (another principal sending the same
    key runs its own request and cannot read the answer); '' without authentication."""
    return f"{principal.source}:{principal.name}" if principal is not None else ""


def fingerprint(method: str, path: str, query: list[tuple[str, str]], headers: dict[str, str], body: bytes) -> str:
    """What makes two requests the same one; ``query`` pairs and ``headers`` in any order.

    ``headers`` are those that change the outcome, already normalised by the caller (a
    delegation list parsed into its set of mechanisms, say). The request line and headers are
    JSON-encoded before the body is appended, so no two different requests share an encoding.
    """
    line = json.dumps([method, path, sorted(query), sorted(headers.items())], separators=(",", ":"))
    return hashlib.sha256(line.encode() + b"\0" + body).hexdigest()


class IdempotencyService:
    def __init__(self, repository: IdempotencyRepository, lifetime_s: int) -> None:
        self.repository = repository
        self.lifetime_s = lifetime_s

    def run_once(
        self,
        key: str,
        operation: str,
        request_fingerprint: str,
        run: Callable[[], tuple[StoredResponse, StoredResponse]],
        principal: str = "",
    ) -> tuple[StoredResponse, bool]:
        """(response, replayed).

        ``run`` returns the response to send and the one to keep (without secrets), or raises a
        CatalogError. A replay returns the kept one.
        """
        deadline = time.monotonic() + WAIT_FOR_FIRST_S
        while True:
            if self.repository.claim(key, operation, request_fingerprint, self.lifetime_s, LEASE_SECONDS, principal):
                return self._run_and_keep(key, principal, run), False
            record = self.repository.get(key, principal)
            if record is None:
                continue  # released or expired between the two statements: claim again
            if record.fingerprint != request_fingerprint:
                raise BadRequest("Idempotency-Key was already used for a different request")
            if record.state == "done":
                metrics.IDEMPOTENCY_REPLAYS.labels(operation).inc()
                return StoredResponse(record.status, dict(record.headers or {}), bytes(record.body or b"")), True
            if time.monotonic() > deadline:
                raise ServiceUnavailable("A request with this Idempotency-Key is still running", retry_after=2)
            time.sleep(POLL_S)

    def _run_and_keep(
        self, key: str, principal: str, run: Callable[[], tuple[StoredResponse, StoredResponse]]
    ) -> StoredResponse:
        try:
            response, kept = run()
        except CatalogError as exc:
            if exc.code >= 500:
                self.repository.release(key, principal)
            else:
                headers = {"Content-Type": "application/json", **exc.headers()}
                self.repository.complete(key, exc.code, headers, _error_bytes(exc), principal)
            raise
        except BaseException:
            self.repository.release(key, principal)
            raise
        if response.status >= 500:
            self.repository.release(key, principal)
        else:
            self.repository.complete(key, kept.status, kept.headers, kept.body, principal)
        return response


def _error_bytes(exc: CatalogError) -> bytes:
    return json.dumps(exc.body()).encode()
