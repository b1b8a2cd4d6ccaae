"""What the audit trail learns about a request while it is served: a note carried by the request.

The audit middleware (app/edge/audit.py) puts one ``AuditNote`` in ``audit_note`` for each request
it records; what decides writes into it - authentication (who, or why nobody), authorization (the
rule that allowed or refused), storage access (what was signed or vended) - and the middleware
reads it when the response starts. A mutable object in a context variable, not a variable per
fact: the dispatcher runs authorization and handlers in a *copy* of the request's context
(``contextvars.copy_context``), where a ``set`` would be lost, but the copy holds the same note.

Only names go in a note: never a token, a secret, a header but the user agent, or a body.
Without a note (no audit middleware: scripts, unit tests) every call here does nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from app.ground.callers import Principal

ALLOWED = "allowed"
REFUSED = "refused"
UNAUTHENTICATED = "unauthenticated"
ERROR = "error"  # no decision was made (a bad request, a failure before authorization)


@dataclass(slots=True)
class AuditNote:
    principal: Principal | None = None
    decision: str | None = None  # ALLOWED or REFUSED by authorization, UNAUTHENTICATED by authentication
    rule: str | None = None  # the grant or right that decided, or why it refused
    access: list[dict[str, Any]] = field(default_factory=list)  # what storage access was signed or vended


audit_note: ContextVar[AuditNote | None] = ContextVar("growler_audit_note", default=None)


def note_decision(decision: str, rule: str) -> None:
    """The decision and the rule that made it; a refusal is kept over a later allow."""
    note = audit_note.get()
    if note is None or note.decision == REFUSED:
        return
    note.decision, note.rule = decision, rule[:500]


def note_access(detail: dict[str, Any]) -> None:
    """Storage access given to the caller (a signed request, vended credentials): names, methods
    and lifetimes only. At most a few per request (a load vends one credential)."""
    note = audit_note.get()
    if note is not None and len(note.access) < 8:
        note.access.append(detail)
