"""The change feed's push sinks through the management API (openapi/management.yaml,
``/event-sinks``): NATS JetStream servers, Kafka clusters and webhooks, their filters, and their
dead letters.

Administrators only: a sink receives every event of the warehouses its filters name (it is the
operator's integration, not a caller's view). A webhook's signing secret and a Kafka sink's SASL
password are stored encrypted with ``GROWLER_SECRETS_KEY`` (app/ground/secrets.py) and never
returned; a Kafka sink refuses SASL PLAIN without TLS (it would send the password in the clear). A
webhook's host must resolve to addresses the webhook rule allows (app/publisher/webhooks.py: no loopback,
link-local, private or database address unless ``GROWLER_WEBHOOK_ALLOWED_NETWORKS`` names it),
checked here and again at every delivery. Changes are audited and recorded on the installation's
change feed like every management change.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from app.ground.errors import BadRequest, NotFound
from app.ground.events import audit
from app.ground.secrets import SecretBox
from app.ground.settings import Settings
from app.management.rights import ManagementRights
from app.publisher.kafka import bootstrap_servers, valid_topic_template
from app.publisher.webhooks import WebhookGuard
from app.rules.requests.management import CreateEventSinkRequest, KafkaSinkSettings
from storage.deliveries import DeadLetter, DeliveryRows, SinkRow

SINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
SCHEMES = {"nats": ("nats", "tls"), "webhook": ("http", "https")}
SASL_PROTOCOLS = ("sasl_plaintext", "sasl_ssl")
TLS_PROTOCOLS = ("ssl", "sasl_ssl")


def sink_view(row: SinkRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "kind": row.kind,
        "url": row.url,
        "filters": row.filters,
        "max-attempts": row.max_attempts,
        "signed": row.kind == "webhook" and row.secret is not None,
        **({"kafka": {**row.options, "sasl-password-set": row.secret is not None}} if row.kind == "kafka" else {}),
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


class EventSinks:
    def __init__(
        self, settings: Settings, rows: DeliveryRows, *, rights: ManagementRights, webhook_guard: WebhookGuard
    ) -> None:
        self.rights = rights  # the management API's rights (app/management/rights.py)
        self.rows = rows
        self.webhook_guard = webhook_guard  # where a webhook may go: the publisher's rule (app/publisher/webhooks.py)
        self._box = SecretBox(settings.secrets_key) if settings.secrets_key else None
        self.audit_recorded = settings.audit_trail  # GROWLER_AUDIT_TRAIL: what an audit stream would carry

    def create(self, request: CreateEventSinkRequest) -> SinkRow:
        name, kind, url = request.name, request.kind, request.url
        who = self.rights.caller()
        if not SINK_NAME.fullmatch(name) or name.startswith("env-"):
            raise BadRequest(f"Invalid event sink name {name!r}: letters, digits, '.', '_', '-', not env-*")
        if kind == "kafka":
            if bootstrap_servers(url) is None:
                raise BadRequest("A kafka sink's url must be kafka://host:port[,host:port...] (its bootstrap servers)")
        else:
            try:
                parsed = urlparse(url)
                _ = parsed.port  # raises for a port that is no number
                valid = parsed.scheme in SCHEMES[kind] and bool(parsed.hostname)
            except ValueError:  # a bracket, a port that is no number
                valid = False
            if not valid:
                raise BadRequest(f"A {kind} sink's url must be {' or '.join(SCHEMES[kind])}://host[:port]...")
        if (request.kafka is not None) != (kind == "kafka"):
            raise BadRequest("A kafka sink needs its kafka settings (at least a topic); other kinds take none")
        secret = request.secret.get_secret_value() if request.secret is not None else None
        if secret is not None and kind != "webhook":
            raise BadRequest("Only a webhook takes a secret")
        if secret is not None and self._box is None:
            raise BadRequest("A webhook secret needs GROWLER_SECRETS_KEY, which encrypts it at rest")
        options: dict[str, Any] = {}
        sealed = self._box.seal({"secret": secret}) if secret is not None and self._box else None
        if request.kafka is not None:
            options, sealed = self._kafka(request.kafka)
        filters = request.filters.model_dump(mode="json") if request.filters is not None else {}
        if filters.get("changes") is False and not filters.get("audit"):
            raise BadRequest("A sink delivers the change feed (changes), the audit trail (audit), or both")
        if filters.get("audit") and not self.audit_recorded:
            raise BadRequest("The audit trail is off (GROWLER_AUDIT_TRAIL=on records it): a sink has nothing to export")
        if kind == "webhook":  # last: the one check that asks DNS
            self.webhook_guard.check_url(url)
        row = self.rows.create_sink(name, kind, url, sealed, filters, request.max_attempts or 8, options)
        audit("create-event-sink", who, {"sink": name, "kind": kind, "url": url})
        return row

    def _kafka(self, settings: KafkaSinkSettings) -> tuple[dict[str, Any], bytes | None]:
        """A Kafka sink's options (what is not secret) and its sealed SASL password."""
        template = settings.topic
        if not valid_topic_template(template):
            raise BadRequest(
                f"Invalid topic {template!r}: letters, digits, '.', '_', '-' and {{warehouse}}, at most 249"
            )
        protocol = settings.security_protocol
        mechanism, username = settings.sasl_mechanism, settings.sasl_username
        password = settings.sasl_password.get_secret_value() if settings.sasl_password is not None else None
        sasl = (mechanism, username, password)
        if protocol in SASL_PROTOCOLS and None in sasl:
            raise BadRequest(f"security-protocol {protocol} needs sasl-mechanism, sasl-username and sasl-password")
        if protocol not in SASL_PROTOCOLS and sasl != (None, None, None):
            raise BadRequest("SASL settings need security-protocol sasl_plaintext or sasl_ssl")
        if protocol == "sasl_plaintext" and mechanism == "PLAIN":
            raise BadRequest("SASL PLAIN without TLS sends the password in the clear: use sasl_ssl")
        if settings.ssl_ca_pem is not None:
            if protocol not in TLS_PROTOCOLS:
                raise BadRequest("ssl-ca-pem needs security-protocol ssl or sasl_ssl")
            if "-----BEGIN CERTIFICATE-----" not in settings.ssl_ca_pem:
                raise BadRequest("ssl-ca-pem must be PEM certificates (-----BEGIN CERTIFICATE-----)")
        if password is not None and self._box is None:
            raise BadRequest("A SASL password needs GROWLER_SECRETS_KEY, which encrypts it at rest")
        sealed = self._box.seal({"sasl-password": password}) if password is not None and self._box else None
        return settings.model_dump(mode="json", exclude={"sasl_password"}), sealed

    def list(self) -> list[SinkRow]:
        return self.rows.sinks()

    def delete(self, name: str) -> None:
        who = self.rights.caller()
        if not self.rows.delete_sink(name):
            raise NotFound(f"Event sink does not exist: {name}")
        audit("delete-event-sink", who, {"sink": name})

    def dead_letters(self, name: str) -> list[DeadLetter]:
        return self.rows.dead_letters(self._sink(name).id, None, 1000)

    def replay(self, name: str) -> int:
        who = self.rights.caller()
        count = self.rows.request_replay(self._sink(name).id)
        audit("replay-dead-letters", who, {"sink": name, "count": count})
        return count

    def _sink(self, name: str) -> SinkRow:
        row = self.rows.sink(name)
        if row is None:
            raise NotFound(f"Event sink does not exist: {name}")
        return row
