"""The audit trail as a stream of the change feed's sinks (issue 51, docs/audit.md "Export"): each
record a CloudEvent, as the management API shows it (``record_view``), delivered in the order of
the transactions that wrote it (storage/deliveries.py ``pending_audit``).

- ``type``: ``org.growler.audit.<decision>`` (allowed, refused, unauthenticated, ...);
  ``source``: ``/growler/audit``; ``id``: ``audit-<record id>``; ``subject``: the object, else the
  operation; ``time``: when it was recorded.
- NATS subject ``growler._audit.<decision>``; Kafka topic: the sink's template with ``_audit`` as
  the warehouse, keyed by the principal (``_anonymous`` without one), so a principal's records
  stay in one partition, in order; a webhook gets the structured event, signed as every delivery.
Nothing secret is in a record (docs/audit.md), so nothing is removed here.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from cloudevents.core.bindings import kafka as kafka_binding
from cloudevents.core.bindings.http import to_structured_event
from cloudevents.core.v1.event import CloudEvent

from app.audit.service import record_view
from app.publisher.kafka import ID_HEADER, KafkaRecord, topic
from storage.deliveries import AuditExport

AUDIT = "_audit"  # the Kafka topic template's {warehouse}, the NATS subject's warehouse token
ANONYMOUS = "_anonymous"


def audit_event_id(record: AuditExport) -> str:
    return f"audit-{record.row['id']}"


def audit_subject(record: AuditExport) -> str:
    return f"growler.{AUDIT}.{record.row['decision']}"


def _event(record: AuditExport) -> CloudEvent:
    row = record.row
    attributes: dict[str, Any] = {
        "id": audit_event_id(record),
        "source": "/growler/audit",
        "type": f"org.growler.audit.{row['decision']}",
        "time": row["recorded_at"].astimezone(UTC),
        "datacontenttype": "application/json",
        "subject": row["object"] or row["operation"],
    }
    return CloudEvent(attributes, record_view(row))


def audit_cloud_event(record: AuditExport) -> tuple[dict[str, str], bytes]:
    """The record as a structured-mode CloudEvent over HTTP or NATS: headers and body."""
    message = to_structured_event(_event(record))
    return dict(message.headers), message.body


def audit_kafka_record(topic_template: str, record: AuditExport) -> KafkaRecord:
    message = kafka_binding.to_structured_event(_event(record))
    key = (record.row["principal"] or ANONYMOUS).encode()
    return KafkaRecord(
        topic(topic_template, AUDIT),
        key,
        {**message.headers, ID_HEADER: audit_event_id(record).encode()},
        message.value,
    )
