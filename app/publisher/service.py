"""Push delivery of the change feed: at least once, in order per warehouse (hence per table), to
NATS JetStream, Kafka and webhooks, as CloudEvents in structured JSON mode (docs/events.md).

Every worker runs a ``Publisher`` thread; the one holding the lease row in PostgreSQL
(storage/deliveries.py) delivers, so exactly one instance publishes at a time across workers and
replicas, and another takes over within ``LEASE_S`` when it dies (SIGKILL included). Each sink
(an endpoint: one NATS server, one webhook URL) is delivered by a thread of its own, from its own
cursor per warehouse: a stuck endpoint holds back only its own cursor, never a commit (commits
write the outbox and return; nothing here runs in a request) nor another sink.

A sink delivers its events one at a time in position order and moves its cursor only after the
endpoint acknowledged the event: JetStream's publish ack (``Nats-Msg-Id`` = the event id, so a
republish after a crash between the ack and the cursor is dropped as a duplicate within the
stream's duplicate window), a webhook's 2xx. So an event is delivered at least once and the events
of a table in their commit order. A webhook that keeps failing is retried with exponential
backoff up to its ``max_attempts``; the event is then a dead letter (listed and replayed by an
administrator through the management API) and the sink moves on - the one exception to order. A
NATS sink never gives up: JetStream is the durable log consumers read, so it waits for it.

A Kafka sink (app/publisher/kafka.py) delivers a batch at a time instead: the round's records are
produced together by an idempotent producer (one object's records in one partition, in order) and
the cursors move once the brokers acknowledged every one; like NATS, it waits for the brokers.

Webhook requests carry ``X-Growler-Signature: sha256=<hex>``, the HMAC-SHA256 of the body with
the sink's secret (kept encrypted: app/ground/secrets.py), and go only to addresses the webhook
rule allows, checked again at every delivery (app/publisher/webhooks.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import quote

from cloudevents.core.bindings import kafka as kafka_binding
from cloudevents.core.bindings.http import to_structured_event
from cloudevents.core.v1.event import CloudEvent

from app.events.feed import rendered
from app.ground import metrics
from app.ground.secrets import SecretBox
from app.publisher.audit import audit_cloud_event, audit_event_id, audit_kafka_record, audit_subject
from app.publisher.kafka import ID_HEADER, INSTALLATION, KafkaRecord, KafkaSettings, KafkaTarget, record_key, topic
from app.publisher.webhooks import DeliveryFailed, WebhookGuard, WebhookTarget
from storage.deliveries import DeliveryRows, SinkRow
from storage.events import MANAGEMENT_STREAM, StoredEvent

log = logging.getLogger(__name__)

LEASE_S = 10.0  # a publisher that stops renewing is replaced after this long
RENEW_S = 2.0
BATCH = 100
IDLE_S = 0.5  # how often an idle sink looks for new events
MAX_BACKOFF_S = 30.0
SUBJECT_ROOT = "growler"
NATS_STREAM = "GROWLER"


def _token(text: str) -> str:
    """A NATS subject token: no separator, wildcard or blank inside (percent-encoded)."""
    return quote(text, safe="-_~:+=@!$&'(),;").replace(".", "%2E") or "_"


def subject(warehouse: str, event: StoredEvent) -> str:
    """``growler.<warehouse>.<namespace levels...>.<table or view>``; ``_`` ends a namespace's own
    events; management events go to ``growler._installation._``."""
    if event.stream == MANAGEMENT_STREAM:
        return f"{SUBJECT_ROOT}._installation._"
    parts = [warehouse, *(event.namespace or ()), event.name or "_"]
    return ".".join([SUBJECT_ROOT, *(_token(part) for part in parts)])


def _attributes(warehouse: str, event: StoredEvent) -> dict[str, Any]:
    """The CloudEvent's attributes (every transport carries the same ones)."""
    path = [*(event.namespace or ()), *([event.name] if event.name else [])]
    attributes: dict[str, Any] = {
        "id": event.event_id,
        "source": f"/growler/{warehouse}" if event.stream != MANAGEMENT_STREAM else "/growler",
        "type": f"org.apache.iceberg.catalog.{event.operation_type}",
        "time": event.created_at.astimezone(UTC),
        "datacontenttype": "application/json",
        "sequence": str(event.position),  # the CloudEvents sequence extension: the feed position
    }
    if path:
        attributes["subject"] = ".".join(path)
    return attributes


def cloud_event(warehouse: str, event: StoredEvent) -> tuple[dict[str, str], bytes]:
    """The event as a structured-mode CloudEvent over HTTP or NATS: headers and body."""
    message = to_structured_event(CloudEvent(_attributes(warehouse, event), rendered(event)))
    return dict(message.headers), message.body


def kafka_record(topic_template: str, warehouse: str, event: StoredEvent) -> KafkaRecord:
    """The event as a Kafka record: the structured-mode CloudEvent as its value, the object's
    identity as its key, its id in the ``ce_id`` header (app/publisher/kafka.py)."""
    message = kafka_binding.to_structured_event(CloudEvent(_attributes(warehouse, event), rendered(event)))
    headers = {**message.headers, ID_HEADER: event.event_id.encode()}
    if event.stream == MANAGEMENT_STREAM:
        return KafkaRecord(topic(topic_template, INSTALLATION), INSTALLATION.encode(), headers, message.value)
    path = [*(event.namespace or ()), *([event.name] if event.name else [])]
    key = record_key(warehouse, event.object_uuid, path)
    return KafkaRecord(topic(topic_template, warehouse), key, headers, message.value)


def matches(filters: dict[str, Any], warehouse: str, event: StoredEvent) -> bool:
    """A sink's filters: warehouses, operation-types, catalog-objects-by-name (prefixes)."""
    if filters.get("warehouses") and warehouse not in filters["warehouses"]:
        return False
    if filters.get("operation-types") and event.operation_type not in filters["operation-types"]:
        return False
    prefixes = filters.get("catalog-objects-by-name")
    if prefixes:
        path = [*(event.namespace or ()), *([event.name] if event.name else [])]
        return any(path[: len(prefix)] == list(prefix) for prefix in prefixes)
    return True


class NatsTarget:
    """JetStream through nats-py on an event loop of the sink's own thread; reconnects on failure."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url, self.timeout_s = url, timeout_s
        self.loop = asyncio.new_event_loop()
        self.connection: Any = None
        self.jetstream: Any = None

    def send(self, subject_: str, event_id: str, headers: dict[str, str], body: bytes) -> None:
        try:
            self.loop.run_until_complete(self._send(subject_, {**headers, "Nats-Msg-Id": event_id}, body))
        except Exception as exc:  # noqa: BLE001 - any failure: reconnect next time
            self._drop()
            raise DeliveryFailed(type(exc).__name__) from exc

    async def _send(self, subject_: str, headers: dict[str, str], body: bytes) -> None:
        if self.connection is None or not self.connection.is_connected:
            import nats

            self.connection = await nats.connect(
                self.url, connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=0
            )
            self.jetstream = self.connection.jetstream(timeout=self.timeout_s)
            from nats.js.api import StreamConfig

            config = StreamConfig(name=NATS_STREAM, subjects=[f"{SUBJECT_ROOT}.>"], duplicate_window=120.0)
            try:
                await self.jetstream.add_stream(config)
            except Exception:  # noqa: BLE001 - it exists (with its own settings): keep it
                await self.jetstream.stream_info(NATS_STREAM)
        await self.jetstream.publish(subject_, body, timeout=self.timeout_s, headers=headers)

    def _drop(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            try:
                self.loop.run_until_complete(asyncio.wait_for(connection.close(), 2))
            except Exception:  # noqa: BLE001 - it is gone either way
                pass

    def close(self) -> None:
        self._drop()
        self.loop.close()


class SinkWorker(threading.Thread):
    """Delivers one sink while this process leads."""

    def __init__(self, publisher: Publisher, sink: SinkRow) -> None:
        super().__init__(name=f"growler-events-{sink.name}", daemon=True)
        self.publisher, self.sink = publisher, sink
        self.rows = publisher.rows
        self.stop = threading.Event()
        self.target: Any
        if sink.kind == "kafka":
            password = publisher.open_secret(sink, "sasl-password")
            self.target = KafkaTarget(sink.name, KafkaSettings.of(sink.url, sink.options, password), self._active)
        elif sink.kind == "nats":
            self.target = NatsTarget(sink.url)
        else:
            self.target = WebhookTarget(sink.url, publisher.open_secret(sink, "secret"), publisher.webhook_guard)

    def _active(self) -> bool:
        return not self.stop.is_set() and self.publisher.leading.is_set()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if not self.publisher.leading.is_set():
                    self.stop.wait(IDLE_S)
                    continue
                try:
                    busy = self._replay() | self._round() | self._audit_round()
                except Exception as exc:  # noqa: BLE001 - the database may be down: try again
                    log.warning("event sink %s: %s", self.sink.name, type(exc).__name__)
                    busy = False
                if not busy:
                    self.stop.wait(IDLE_S)
        finally:
            self.target.close()

    def _round(self) -> bool:
        if self.sink.filters.get("changes") is False:  # a sink of the audit trail only
            return False
        events = self.rows.pending(self.sink.id, BATCH)
        self._report_lag(events)
        names = self.publisher.warehouse_names()
        if self.sink.kind == "kafka":
            return self._round_kafka(events, names)
        for event in events:
            if self.stop.is_set() or not self.publisher.leading.is_set():
                return True
            warehouse = names.get(event.stream, str(event.stream))
            dead = None
            if matches(self.sink.filters, warehouse, event):
                dead = self._deliver(warehouse, event)
            if not self.rows.advance(self.sink.id, self.publisher.holder, event.stream, event.position, dead):
                self.publisher.leading.clear()  # the lease went elsewhere: stop at once
                return False
        return bool(events)

    def _round_kafka(self, events: list[StoredEvent], names: dict[int, str]) -> bool:
        """The round's records produced at once; the cursors moved when all were acknowledged.
        What was not is produced again (only that, in order) after backoff, until it is."""
        template = str(self.sink.options.get("topic") or "growler.{warehouse}")
        records = []
        for event in events:
            warehouse = names.get(event.stream, str(event.stream))
            if matches(self.sink.filters, warehouse, event):
                records.append(kafka_record(template, warehouse, event))
        if not self._produce(records):
            return True  # stopping, or no longer leading: the cursors stay, the next leader resends
        last = {event.stream: event.position for event in events}  # events come in position order
        for stream, position in last.items():
            if not self.rows.advance(self.sink.id, self.publisher.holder, stream, position, None):
                self.publisher.leading.clear()  # the lease went elsewhere: stop at once
                return False
        return bool(events)

    def _produce(self, records: list[KafkaRecord]) -> bool:
        """Produce a batch until the brokers acknowledged every record (what was not is produced
        again, only that, in order, after backoff); False when stopping or no longer leading."""
        attempt = 0
        while records:
            attempt += 1
            outcome = self.target.send_batch(records)
            metrics.EVENTS_DELIVERED.labels(self.sink.name).inc(outcome.count(None))
            records = [record for record, error in zip(records, outcome, strict=True) if error]
            if records and not self._active():
                return False
            if records:
                metrics.EVENTS_DELIVERY_FAILURES.labels(self.sink.name, "retry").inc()
                log.warning(
                    "event sink %s: %d records refused: %s", self.sink.name, len(records), next(filter(None, outcome))
                )
                if self.stop.wait(min(MAX_BACKOFF_S, self.publisher.backoff_s * 2 ** (attempt - 1))):
                    return False
        return True

    def _deliver(self, warehouse: str, event: StoredEvent) -> tuple[str, int, str] | None:
        """Deliver until acknowledged; None when it was, the dead letter when a webhook gave up."""
        headers, body = cloud_event(warehouse, event)
        return self._send(subject(warehouse, event), event.event_id, headers, body, self.sink.kind == "webhook")

    def _send(
        self, target_subject: str, event_id: str, headers: dict[str, str], body: bytes, may_give_up: bool
    ) -> tuple[str, int, str] | None:
        attempt = 0
        while True:
            attempt += 1
            try:
                self.target.send(target_subject, event_id, headers, body)
                metrics.EVENTS_DELIVERED.labels(self.sink.name).inc()
                return None
            except DeliveryFailed as exc:
                metrics.EVENTS_DELIVERY_FAILURES.labels(self.sink.name, "retry").inc()
                error = str(exc)
            if may_give_up and attempt >= self.sink.max_attempts:
                metrics.EVENTS_DELIVERY_FAILURES.labels(self.sink.name, "dead-letter").inc()
                log.warning(
                    "event sink %s: event %s dead-lettered after %d attempts", self.sink.name, event_id, attempt
                )
                return (event_id, attempt, error)
            if self.stop.wait(min(MAX_BACKOFF_S, self.publisher.backoff_s * 2 ** (attempt - 1))):
                raise DeliveryFailed("stopping")

    def _audit_round(self) -> bool:
        """The audit trail's next records (app/publisher/audit.py), for a sink that asked for them:
        delivered in order and never given up on (no dead letters: the cursor waits for the
        endpoint, holding back only this sink's audit stream)."""
        if not self.sink.filters.get("audit"):
            return False
        records = self.rows.pending_audit(self.sink.id, BATCH)
        if not records:
            return False
        if self.sink.kind == "kafka":
            template = str(self.sink.options.get("topic") or "growler.{warehouse}")
            if not self._produce([audit_kafka_record(template, record) for record in records]):
                return True
            done = [records[-1]]
        else:
            done = []
            for record in records:
                if not self._active():
                    break
                headers, body = audit_cloud_event(record)
                self._send(audit_subject(record), audit_event_id(record), headers, body, may_give_up=False)
                done.append(record)
        for record in done[-1:]:
            if not self.rows.advance_audit(self.sink.id, self.publisher.holder, record.tx, record.row["id"]):
                self.publisher.leading.clear()  # the lease went elsewhere: stop at once
                return False
        return True

    def _replay(self) -> bool:
        """Dead letters an administrator asked for: one more delivery each (with its retries)."""
        if self.sink.kind != "webhook":
            return False
        names = self.publisher.warehouse_names()
        replays = self.rows.to_replay(self.sink.id, BATCH)
        for letter, event in replays:
            if event is None:
                self.rows.settle_dead_letter(
                    self.sink.id, letter.stream, letter.position, "the event is past its retention"
                )
                continue
            dead = self._deliver(names.get(event.stream, str(event.stream)), event)
            self.rows.settle_dead_letter(self.sink.id, letter.stream, letter.position, dead[2] if dead else None)
        return bool(replays)

    def _report_lag(self, events: list[StoredEvent]) -> None:
        oldest = min((event.created_at for event in events), default=None)
        age = (datetime.now(UTC) - oldest).total_seconds() if oldest else 0.0
        metrics.EVENTS_LAG_SECONDS.labels(self.sink.name).set(max(age, 0.0))


class Publisher:
    """The lease, and one ``SinkWorker`` per configured sink while this process holds it."""

    # Every publisher started in this process and not stopped: a process that builds several apps
    # over one database (the test suite's in-process apps) stops them all to hand the lease on.
    _running: ClassVar[weakref.WeakSet[Publisher]] = weakref.WeakSet()

    @classmethod
    def running(cls) -> list[Publisher]:
        return list(cls._running)

    def __init__(
        self,
        rows: DeliveryRows,
        secrets: Callable[[], SecretBox | None],
        *,
        webhook_guard: WebhookGuard,
        nats_url: str | None = None,
        backoff_s: float = 0.5,
    ) -> None:
        self.rows = rows
        self.webhook_guard = webhook_guard  # where webhooks may go (app/publisher/webhooks.py): no default
        self.secrets = secrets
        self.nats_url = nats_url
        self.backoff_s = backoff_s
        self.holder = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.leading = threading.Event()
        self._stop = threading.Event()
        self._workers: dict[int, SinkWorker] = {}
        self._thread: threading.Thread | None = None
        self._names: tuple[float, dict[int, str]] = (0.0, {})

    def start(self) -> None:
        if self.nats_url:  # GROWLER_EVENTS_NATS_URL: the environment's sink
            self.rows.ensure_sink("env-nats", "nats", self.nats_url)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="growler-events-publisher", daemon=True)
        self._thread.start()
        Publisher._running.add(self)

    def stop(self) -> None:
        Publisher._running.discard(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=RENEW_S + 5)  # it takes no lease after this
        for worker in self._workers.values():
            worker.stop.set()
        self._workers.clear()
        if self.leading.is_set():
            self.leading.clear()
            try:
                self.rows.release_lease(self.holder)
            except Exception:  # noqa: BLE001 - it lapses by itself
                pass

    def open_secret(self, sink: SinkRow, field: str) -> str | None:
        """The sink's decrypted secret ``field``: a webhook's ``secret``, a Kafka sink's ``sasl-password``."""
        if sink.secret is None:
            return None
        box = self.secrets()
        if box is None:
            log.warning("event sink %s has a secret but GROWLER_SECRETS_KEY is not set: not using it", sink.name)
            return None
        return box.open(bytes(sink.secret)).get(field)

    def warehouse_names(self) -> dict[int, str]:
        at, names = self._names
        if time.monotonic() - at > 5:
            names = self.rows.warehouse_names()
            self._names = (time.monotonic(), names)
        return names

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self.rows.take_lease(self.holder, LEASE_S):
                    self.leading.set()
                    self._reconcile()
                else:
                    self.leading.clear()
            except Exception as exc:  # noqa: BLE001 - the database may be down: not leading meanwhile
                self.leading.clear()
                log.warning("event publisher: %s", type(exc).__name__)
            self._stop.wait(RENEW_S)

    def _reconcile(self) -> None:
        """One worker per configured sink; a removed or changed sink's worker stops."""
        sinks = {sink.id: sink for sink in self.rows.sinks()}
        for sink_id, worker in list(self._workers.items()):
            if sinks.get(sink_id) != worker.sink or not worker.is_alive():
                worker.stop.set()
                del self._workers[sink_id]
        for sink_id, sink in sinks.items():
            if sink_id not in self._workers:
                worker = SinkWorker(self, sink)
                self._workers[sink_id] = worker
                worker.start()
