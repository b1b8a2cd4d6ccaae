"""Event logs, defined once: the request and commit loggers (JSON lines on stderr), the request id
of the request being served, and the recorder of one commit's outcome (a metric and a log line).

The HTTP edge writes the request lines and sets the request id; the commit loop records commits.
No framework here: both stand on this module.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from app.ground import metrics
from app.ground.callers import current_principal
from app.ground.errors import CatalogError, CommitFailed, CommitStateUnknown, Protected

REQUEST_LOGGER = "growler.request"
COMMIT_LOGGER = "growler.commit"
AUDIT_LOGGER = "growler.audit"  # one line per refusal and per management change (no secrets)
PRINCIPAL = "growler.principal"  # in scope["extensions"]: the authenticated principal (app/edge/auth)

# The request id of the request being served; a2wsgi copies the context into the Flask thread.
request_id_var: ContextVar[str | None] = ContextVar("growler_request_id", default=None)


# One encoder for every line (``json.dumps`` with options builds a new one per call: a request's
# log line is on the path of every signRequest).
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False, separators=(",", ":"))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the record's ``fields``, exc."""

    # (second, "YYYY-MM-DDTHH:MM:SS") of the last line: the lines of one second share it, so a
    # line formats its milliseconds only (a datetime and its isoformat were a quarter of a
    # request line's cost; the text is the same: ``isoformat(timespec="milliseconds")``).
    _second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": self._timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return _ENCODER.encode(doc)

    def _timestamp(self, created: float) -> str:
        """``2026-11-25T05:33:07.123Z``: rounded to the microsecond as datetime does, then cut."""
        fraction, whole = math.modf(created)
        second, micro = int(whole), round(fraction * 1e6)
        if micro >= 1_000_000:
            second, micro = second + 1, micro - 1_000_000
        cached = self._second
        if cached[0] != second:
            cached = self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return f"{cached[1]}.{micro // 1000:03d}Z"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (pytest swaps it per test)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_event_logs() -> None:
    """The request, commit and audit loggers: JSON lines on stderr, whatever the root logger does."""
    for name in (REQUEST_LOGGER, COMMIT_LOGGER, AUDIT_LOGGER):
        logger = logging.getLogger(name)
        if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
            handler = _StderrHandler()
            handler.setFormatter(JsonFormatter())
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


class CommitRecorder:
    """Counts and logs one commit (a table or a multi-table transaction) once its outcome is known.

    ``with CommitRecorder(...) as recorder:`` around the retry loop; the commit path sets
    ``retries`` and, on success, ``locations`` (old, new metadata location per table).
    """

    def __init__(self, warehouse: str, tables: list[str]) -> None:
        self.warehouse = warehouse
        self.tables = tables
        self.kind = "transaction" if len(tables) > 1 else "table"
        self.retries = 0
        self.locations: list[tuple[str | None, str | None]] = []

    def retried(self) -> None:
        self.retries += 1
        metrics.COMMIT_RETRIES.labels(self.kind).inc()

    def __enter__(self) -> CommitRecorder:
        return self

    def __exit__(self, _type: Any, exc: BaseException | None, _tb: Any) -> None:
        outcome = _outcome(exc)
        metrics.COMMITS.labels(self.kind, outcome).inc()
        log = logging.getLogger(COMMIT_LOGGER)
        for i, table in enumerate(self.tables):
            old, new = self.locations[i] if i < len(self.locations) else (None, None)
            fields = {
                "event": "commit",
                "request_id": request_id_var.get(),
                "kind": self.kind,
                "outcome": outcome,
                "warehouse": self.warehouse,
                "table": table,
                "old_metadata_location": old,
                "new_metadata_location": new,
                "retries": self.retries,
            }
            if exc is not None:
                fields["error"] = exc.error_type if isinstance(exc, CatalogError) else type(exc).__name__
            log.log(logging.INFO if exc is None else logging.WARNING, "commit", extra={"fields": fields})


def audit(
    action: str, principal: str | None, target: dict[str, Any], outcome: str = "ok", status: int | None = None
) -> None:
    """One audit line: who (``principal``, None when authentication is off) did what (``action``)
    to which object (``target``: names only, never a secret), and whether it was allowed.

    The one shape for every audited event: a management change (outcome "ok"), a refusal of the
    management API or of a catalog operation ("forbidden", or "hidden" when the caller got the 404
    that hides the object), with the HTTP ``status`` the caller saw (None for a change).
    """
    fields = {
        "event": "audit",
        "request_id": request_id_var.get(),
        "principal": principal,
        "action": action,
        "target": target,
        "outcome": outcome,
        "status": status,
    }
    level = logging.INFO if outcome == "ok" else logging.WARNING
    logging.getLogger(AUDIT_LOGGER).log(level, action, extra={"fields": fields})


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "committed"
    if isinstance(exc, CommitFailed):
        return "conflict"
    if isinstance(exc, CommitStateUnknown):
        return "unknown"
    if isinstance(exc, CatalogError) and exc.code < 500:
        return "rejected"
    return "failed"


@contextlib.contextmanager
def refusals_counted(kind: str) -> Iterator[None]:
    """Counts (and logs: logger growler.recycle_bin) an operation refused because something is
    protected (docs/recycle-bin.md "Protection"), then re-raises. Here, beside the commit
    recorder it wraps a commit with, so a commit hands off to no deletion module for it."""
    try:
        yield
    except Protected as exc:
        metrics.PROTECTION_EVENTS.labels("refused", kind).inc()
        principal = current_principal.get()
        by = principal.name if principal is not None else None
        fields = {"event": "protected-refusal", "by": by}
        logging.getLogger("growler.recycle_bin").warning("refused: %s", exc.message, extra={"fields": fields})
        raise
