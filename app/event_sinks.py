"""The change feed's push sinks through the management API (openapi/management.yaml,
``/event-sinks``): NATS JetStream servers and webhooks, their filters, and their dead letters.

Administrators only: a sink receives every event of the warehouses its filters name (it is the
operator's integration, not a caller's view). A webhook's signing secret is stored encrypted with
``GROWLER_SECRETS_KEY`` (app/ground/secrets.py) and never returned. Changes are audited and
recorded on the installation's change feed like every management change.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from app.authorization import Authorizer
from app.ground.errors import BadRequest, NotFound
from app.ground.events import audit
from app.ground.secrets import SecretBox
from app.ground.settings import Settings
from app.management_rights import ManagementRights
from storage.deliveries import DeadLetter, DeliveryRows, SinkRow

SINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
SCHEMES = {"nats": ("nats", "tls"), "webhook": ("http", "https")}


def sink_view(row: SinkRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "url": row.url,
        "filters": row.filters,
        "max-attempts": row.max_attempts,
        "signed": row.secret is not None,
    }


def dead_letter_view(row: DeadLetter) -> dict[str, Any]:
    return {
        "event-id": row.event_id,
        "position": row.position,
        "attempts": row.attempts,
        "last-error": row.last_error,
        "replay-requested": row.replay,
        "created-at": row.created_at.isoformat(),
    }


class EventSinks(ManagementRights):
    def __init__(self, settings: Settings, rows: DeliveryRows, *, authorizer: Authorizer) -> None:
        self.authorizer = authorizer  # required: no permissive default (app/management_rights.py)
        self.rows = rows
        self._box = SecretBox(settings.secrets_key) if settings.secrets_key else None

    def create(self, body: dict[str, Any]) -> SinkRow:
        name, kind, url = str(body["name"]), str(body["kind"]), str(body["url"])
        who = self.caller()
        if not SINK_NAME.match(name) or name.startswith("env-"):
            raise BadRequest(f"Invalid event sink name {name!r}: letters, digits, '.', '_', '-', not env-*")
        try:
            parsed = urlparse(url)
            _ = parsed.port  # raises for a port that is no number
            valid = parsed.scheme in SCHEMES[kind] and bool(parsed.hostname)
        except ValueError:  # a bracket, a port that is no number
            valid = False
        if not valid:
            raise BadRequest(f"A {kind} sink's url must be {' or '.join(SCHEMES[kind])}://host[:port]...")
        secret = body.get("secret")
        if secret is not None and kind != "webhook":
            raise BadRequest("Only a webhook takes a secret")
        if secret is not None and self._box is None:
            raise BadRequest("A webhook secret needs GROWLER_SECRETS_KEY, which encrypts it at rest")
        sealed = self._box.seal({"secret": secret}) if secret is not None and self._box else None
        row = self.rows.create_sink(
            name, kind, url, sealed, dict(body.get("filters") or {}), int(body.get("max-attempts") or 8)
        )
        audit("create-event-sink", who, {"sink": name, "kind": kind, "url": url})
        return row

    def list(self) -> list[SinkRow]:
        return self.rows.sinks()

    def delete(self, name: str) -> None:
        who = self.caller()
        if not self.rows.delete_sink(name):
            raise NotFound(f"Event sink does not exist: {name}")
        audit("delete-event-sink", who, {"sink": name})

    def dead_letters(self, name: str) -> list[DeadLetter]:
        return self.rows.dead_letters(self._sink(name).id, None, 1000)

    def replay(self, name: str) -> int:
        who = self.caller()
        count = self.rows.request_replay(self._sink(name).id)
        audit("replay-dead-letters", who, {"sink": name, "count": count})
        return count

    def _sink(self, name: str) -> SinkRow:
        row = self.rows.sink(name)
        if row is None:
            raise NotFound(f"Event sink does not exist: {name}")
        return row
