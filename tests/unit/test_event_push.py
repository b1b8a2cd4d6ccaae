"""The change feed's push format (app/publisher/service.py, app/publisher/kafka.py): CloudEvents, NATS
subjects, Kafka records (topic, key, headers) and bootstrap servers, signatures, filters."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

from app.publisher.audit import audit_cloud_event, audit_kafka_record, audit_subject
from app.publisher.kafka import bootstrap_servers, valid_topic_template
from app.publisher.service import cloud_event, kafka_record, matches, subject
from app.publisher.webhooks import signature
from storage.deliveries import AuditExport
from storage.events import StoredEvent


def event(**overrides) -> StoredEvent:
    values = dict(
        stream=3,
        position=42,
        event_id="6f1c0a52-3c58-4c3f-9d59-7d6a3f1f0e11",
        request_id="r1",
        request_event_count=1,
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        operation_type="update-table",
        object_type="table",
        namespace=["sales", "eu"],
        name="orders",
        object_uuid="u",
        actor={"principal": "etl", "source": "growler"},
        operation={"operation-type": "update-table", "identifier": {"namespace": ["sales", "eu"], "name": "orders"}},
    )
    values.update(overrides)
    return StoredEvent(**values)


def test_a_structured_cloud_event_carries_the_feed_event():
    headers, body = cloud_event("wh", event())
    assert headers["content-type"] == "application/cloudevents+json"
    doc = json.loads(body)
    assert (doc["specversion"], doc["id"], doc["source"], doc["type"]) == (
        "1.0",
        "6f1c0a52-3c58-4c3f-9d59-7d6a3f1f0e11",
        "/growler/wh",
        "org.apache.iceberg.catalog.update-table",
    )
    assert (doc["subject"], doc["sequence"], doc["time"]) == ("sales.eu.orders", "42", "2026-01-02T03:04:05Z")
    assert doc["data"]["event-id"] == doc["id"] and doc["data"]["timestamp-ms"] == 1767323045000
    assert doc["data"]["operation"]["operation-type"] == "update-table"


def test_subjects_per_warehouse_namespace_and_table():
    assert subject("wh", event()) == "growler.wh.sales.eu.orders"
    assert subject("wh", event(name=None, object_type="namespace")) == "growler.wh.sales.eu._"
    assert subject("w h", event(namespace=["a.b", "*"], name=">")) == "growler.w%20h.a%2Eb.%2A.%3E"
    assert subject("wh", event(stream=0, namespace=None, name=None)) == "growler._installation._"


def test_the_signature_is_the_hmac_of_the_body():
    body = b'{"id":"1"}'
    assert signature("k", body) == "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()


def test_filters():
    assert matches({}, "wh", event())
    assert not matches({"warehouses": ["other"]}, "wh", event())
    assert matches({"operation-types": ["update-table"]}, "wh", event())
    assert not matches({"operation-types": ["drop-table"]}, "wh", event())
    assert matches({"catalog-objects-by-name": [["sales"]]}, "wh", event())
    assert not matches({"catalog-objects-by-name": [["sales", "us"]]}, "wh", event())


def test_a_kafka_record_is_the_structured_event_keyed_by_the_object():
    record = kafka_record("growler.{warehouse}", "w h", event())
    assert record.topic == "growler.w_h" and record.key == b"u"  # the table's uuid: it survives a rename
    assert record.headers == {"content-type": b"application/cloudevents+json", "ce_id": event().event_id.encode()}
    assert json.loads(record.value) == json.loads(cloud_event("w h", event())[1])
    namespace = kafka_record("events", "wh", event(name=None, object_type="namespace", object_uuid=None))
    assert (namespace.topic, namespace.key) == ("events", b"wh/sales/eu")
    assert kafka_record("t", "wh", event(namespace=["a/b"], name=None, object_uuid=None)).key == b"wh/a%2Fb"
    management = kafka_record("growler.{warehouse}", "0", event(stream=0, namespace=None, name=None, object_uuid=None))
    assert (management.topic, management.key) == ("growler._installation", b"_installation")


def test_kafka_bootstrap_servers_and_topic_templates():
    assert bootstrap_servers("kafka://b1:9092,10.0.0.2:9093,[::1]:9094/") == "b1:9092,10.0.0.2:9093,[::1]:9094"
    for bad in (
        "http://b1:9092",
        "kafka://b1",
        "kafka://b1:0",
        "kafka://b1:70000",
        "kafka://b1:9092/x",
        "kafka://",
        "kafka://b1:9092,",
        "kafka://" + ",".join(["b:1"] * 17),
        "kafka://us er@b1:9092",
    ):
        assert bootstrap_servers(bad) is None, bad
    assert valid_topic_template("growler.{warehouse}.events") and valid_topic_template("plain-topic_1")
    for bad in ("", "a/b", "{warehouse", "{namespace}", "x" * 250, "t\n"):
        assert not valid_topic_template(bad), bad


def audit_row(**overrides) -> AuditExport:
    row = {
        "id": 17,
        "recorded_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "request_id": "r9",
        "principal": "etl",
        "identity_provider": "growler",
        "roles": ["loaders"],
        "operation": "loadTable",
        "method": "GET",
        "path": "/v1/wh/namespaces/sales/tables/orders",
        "object": "wh:sales.orders",
        "decision": "refused",
        "rule": "lacks read on table wh:sales.orders",
        "status": 403,
        "client": "10.0.0.1",
        "user_agent": None,
        "access": None,
    }
    row.update(overrides)
    return AuditExport(1234, row)


def test_an_audit_record_is_a_cloud_event_of_its_own_stream():
    """app/publisher/audit.py: the record as the management API shows it, typed by its decision."""
    headers, body = audit_cloud_event(audit_row())
    assert headers["content-type"] == "application/cloudevents+json"
    doc = json.loads(body)
    assert (doc["id"], doc["source"], doc["type"], doc["subject"]) == (
        "audit-17",
        "/growler/audit",
        "org.growler.audit.refused",
        "wh:sales.orders",
    )
    assert doc["data"]["rule"] == "lacks read on table wh:sales.orders" and "user-agent" not in doc["data"]
    assert audit_subject(audit_row()) == "growler._audit.refused"
    assert json.loads(audit_cloud_event(audit_row(object=None))[1])["subject"] == "loadTable"


def test_an_audit_kafka_record_goes_to_the_audit_topic_keyed_by_the_principal():
    record = audit_kafka_record("growler.{warehouse}", audit_row())
    assert (record.topic, record.key) == ("growler._audit", b"etl")
    assert dict(record.headers)["ce_id"] == b"audit-17"
    assert json.loads(record.value)["data"]["id"] == 17
    anonymous = audit_kafka_record("audit", audit_row(principal=None, decision="unauthenticated"))
    assert (anonymous.topic, anonymous.key) == ("audit", b"_anonymous")
