"""The change feed's Kafka sink (app/publisher/service.py delivers, this module talks to the brokers).

Each event is one record: the value is the CloudEvent in structured JSON mode (the CloudEvents
Kafka binding: ``content-type: application/cloudevents+json``), the key the object's identity
(its uuid, else its name path: see ``record_key``) and a ``ce_id`` header the event id, so a
consumer can drop a repeat without parsing the value. The topic is the sink's template with
``{warehouse}`` replaced by the warehouse's name (``_installation`` for management events).

Why the order per table holds: records with the same key go to the same partition (librdkafka's
``murmur2_random`` partitioner, the one the Java client uses, so Java producers agree), and the
producer is idempotent (``enable.idempotence``, ``acks=all``, at most five requests in flight with
sequence numbers): the broker keeps each partition's records in the order they were produced and
drops the duplicate of a retried request. Records never time out (``message.timeout.ms=0``):
while the brokers are away they wait in the producer and go out in order when one is back, the
way a NATS sink waits for JetStream. The publisher moves the sink's cursor only once every record
of a batch was acknowledged by the in-sync replicas; what was refused (a record larger than the
topic's ``max.message.bytes``, a topic the user may not write) is produced again after backoff,
until the cause is fixed: the sink waits rather than skip. A record refused as it is handed to
the producer keeps the rest of its batch back. So a record may arrive twice (same ``ce_id``: a
publisher that died between the acknowledgement and its cursor), and never before a record of
the same object that precedes it - except when the brokers refused one for good and accepted
later ones of its partition: it arrives after them, once the cause is fixed (docs/events.md).

The client is confluent-kafka (librdkafka): maintained by Confluent, manylinux wheels with SASL
and TLS built in, and the reference implementation of the idempotent producer.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

log = logging.getLogger(__name__)

SCHEME = "kafka://"
MAX_SERVERS = 16
WAREHOUSE = "{warehouse}"
INSTALLATION = "_installation"  # the {warehouse} of management events
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")  # fullmatch: "$" would let a final newline in
_NOT_IN_TOPIC = re.compile(r"[^A-Za-z0-9._-]")
_SERVER = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\]):(\d{1,5})")
ID_HEADER = "ce_id"
STOPPED = "stopped before the broker answered"
HELD_BACK = "not produced: an earlier record of the batch was refused"
WAITING_LOG_S = 30.0  # how often a batch still waiting for the brokers says so


class _ClientLog:
    """librdkafka's log (``logger``): its connection failures, one per retry while a broker is
    away, go to DEBUG; the sink says itself, every ``WAITING_LOG_S``, that records are waiting.
    Only what librdkafka calls critical (e.g. a fatal producer error) stays an error."""

    def log(self, level: int, message: str, *args: Any) -> None:
        log.log(logging.ERROR if level >= logging.CRITICAL else logging.DEBUG, message, *args)


def bootstrap_servers(url: str) -> str | None:
    """``kafka://host:port[,host:port...]`` -> librdkafka's ``bootstrap.servers``; None if malformed."""
    if not url.startswith(SCHEME):
        return None
    servers = url[len(SCHEME) :].rstrip("/").split(",")
    if not 1 <= len(servers) <= MAX_SERVERS:
        return None
    for server in servers:
        found = _SERVER.fullmatch(server)
        if found is None or not 1 <= int(found.group(1)) <= 65535:
            return None
    return ",".join(servers)


def valid_topic_template(template: str) -> bool:
    """A legal topic name once ``{warehouse}`` (any number of times) is replaced by a name."""
    return bool(TOPIC.fullmatch(template.replace(WAREHOUSE, "w")))


def topic(template: str, warehouse: str) -> str:
    """The template with the warehouse's name, its characters a topic cannot hold as ``_``."""
    return template.replace(WAREHOUSE, _NOT_IN_TOPIC.sub("_", warehouse))[:249]


def record_key(warehouse: str, object_uuid: str | None, path: list[str]) -> bytes:
    """The partitioning key: a table's or view's uuid (it survives a rename, so the object's events
    stay in one partition), else ``<warehouse>/<namespace levels...>`` for a namespace's own events
    (levels percent-encoded), ``_installation`` for management events."""
    if object_uuid:
        return object_uuid.encode()
    return "/".join([warehouse, *(quote(part, safe="") for part in path)]).encode()


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    key: bytes
    headers: dict[str, bytes]
    value: bytes


@dataclass(frozen=True)
class KafkaSettings:
    """A Kafka sink's connection settings (``options`` of its row, plus its decrypted password)."""

    servers: str
    security_protocol: str = "plaintext"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_pem: str | None = None

    @classmethod
    def of(cls, url: str, options: dict[str, Any], sasl_password: str | None) -> KafkaSettings:
        return cls(
            servers=bootstrap_servers(url) or "",
            security_protocol=options.get("security-protocol") or "plaintext",
            sasl_mechanism=options.get("sasl-mechanism"),
            sasl_username=options.get("sasl-username"),
            sasl_password=sasl_password,
            ssl_ca_pem=options.get("ssl-ca-pem"),
        )

    def producer_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.servers,
            "client.id": "growler-events",
            "enable.idempotence": True,
            "acks": "all",
            "max.in.flight.requests.per.connection": 5,
            "message.timeout.ms": 0,  # never: a record waits for the brokers (see the module's docstring)
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "reconnect.backoff.max.ms": 2000,  # a broker back is used within two seconds
            "security.protocol": self.security_protocol,
            "logger": _ClientLog(),
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username is not None:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            config["sasl.password"] = self.sasl_password
        if self.ssl_ca_pem:
            config["ssl.ca.pem"] = self.ssl_ca_pem
        return config


class KafkaTarget:
    """An idempotent producer, made on first use and made anew after any failure (a fatal error of
    the idempotent producer leaves it unusable; a new one starts with a new producer id)."""

    def __init__(self, name: str, settings: KafkaSettings, active: Callable[[], bool]) -> None:
        self.name, self.settings, self.active = name, settings, active  # active(): go on delivering
        self.producer: Any = None

    def send_batch(self, records: list[KafkaRecord]) -> list[str | None]:
        """Produce the records in order and wait for every acknowledgement: per record None (the
        in-sync replicas have it) or why not. Returns early (``STOPPED``) when the sink stops."""
        from confluent_kafka import KafkaException, Producer

        if self.producer is None:
            self.producer = Producer(self.settings.producer_config())
        producer = self.producer
        pending = object()
        results: list[Any] = [pending] * len(records)

        def reporter(index: int):
            def report(error: Any, _message: Any) -> None:
                results[index] = None if error is None else error.str()

            return report

        for index, record in enumerate(records):
            if not self.active():
                break
            if index and results[index - 1] not in (None, pending):  # refused at once: keep the rest back
                results[index:] = [HELD_BACK] * (len(records) - index)
                break
            while results[index] is pending and self.active():
                try:
                    producer.produce(
                        record.topic,
                        record.value,
                        record.key,
                        headers=list(record.headers.items()),
                        on_delivery=reporter(index),
                    )
                    break
                except BufferError:  # the local queue is full: serve acknowledgements first
                    producer.poll(0.1)
                except KafkaException as exc:  # refused locally (e.g. a fatal producer state)
                    results[index] = exc.args[0].str() if exc.args else type(exc).__name__
        said = time.monotonic()
        while pending in results and self.active():
            producer.flush(0.5)  # serves the delivery reports; returns after 0.5 s at most
            if time.monotonic() - said > WAITING_LOG_S and pending in results:
                said = time.monotonic()
                waiting = results.count(pending)
                log.warning("event sink %s: %d records waiting for the Kafka brokers", self.name, waiting)
        outcome = [STOPPED if result is pending else result for result in results]
        if any(outcome):
            self.close()
        return outcome

    def close(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            try:
                producer.purge()  # what was not sent yet is sent again from the cursor
                producer.flush(1)
                producer.close()
            except Exception:  # noqa: BLE001 - it is gone either way
                pass
