"""Push delivery to Kafka (app/publisher/service.py, app/publisher/kafka.py) through the suite's gunicorn
server and a real Apache Kafka broker (KRaft, tests/integration/kafka_support.py): committers write
to three tables while the broker is stopped and started again mid-stream. Every event of the feed
reaches the topic, each table's records in their feed order, under the table's uuid as key (so in
one partition of three), with the event id in the ``ce_id`` header; a repeat (the publisher's
window between the broker's acknowledgement and its cursor, opened by moving the cursor back)
carries the same event id and the same value. A second sink gets the same events over SASL
SCRAM-SHA-512 with its sealed password; a third, with a wrong password, none. The example
consumer (examples/kafka_consumer.py) reads every event once.

Whichever process holds the publisher's lease delivers (the suite's in-process app or a gunicorn
worker): the test needs a publisher, not a particular one, so it runs in the suite's session.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from tests.api.tables_support import create_request
from tests.integration.conftest import REPO
from tests.integration.kafka_support import KAFKA, SCRAM_PASSWORD, SCRAM_USER, KafkaBroker
from tests.integration.proc_support import wait_for

SINKS = "/management/v1/event-sinks"
PER_PHASE = 15  # commits before, while and after the broker is down


@pytest.fixture
def kafka_broker() -> Iterator[KafkaBroker]:
    broker = KAFKA.take()
    yield broker
    broker.stop()
    shutil.rmtree(broker.directory, ignore_errors=True)


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, bytes, dict[str, bytes], dict]]:
    """Every record of the topic up to its end: (partition, key, headers, value)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"t{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        found, read = [], dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 20
        while any(read[p] < ends[p] for p in partitions):
            assert time.monotonic() < deadline, "timed out reading the topic"
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            read[message.partition()] = message.offset() + 1
            found.append((message.partition(), message.key(), dict(message.headers()), json.loads(message.value())))
        return found
    finally:
        consumer.close()


def test_every_event_reaches_kafka_in_table_order_through_a_broker_restart(server, settings, kafka_broker):
    namespace = f"kfeed{uuid.uuid4().hex[:8]}"
    base = f"{server.url}/v1/{server.warehouse}"
    topic = f"{namespace}.{server.warehouse}"
    tables = ["a", "b", "c"]
    with httpx.Client(timeout=60) as http:
        made = http.post(
            f"{server.url}{SINKS}",
            json={
                "name": namespace,
                "kind": "kafka",
                "url": f"kafka://{kafka_broker.bootstrap}",
                "kafka": {"topic": namespace + ".{warehouse}"},
                "filters": {"catalog-objects-by-name": [[namespace]]},
            },
        )
        assert made.status_code == 201, made.text
        assert made.json()["kafka"] == {
            "topic": namespace + ".{warehouse}",
            "security-protocol": "plaintext",
            "sasl-password-set": False,
        }
        # the same events over SASL SCRAM (the password sealed at rest, opened by the publisher), and
        # with a wrong password: that sink delivers nothing and keeps its cursor
        for name, password in ((f"{namespace}-sasl", SCRAM_PASSWORD), (f"{namespace}-denied", "not-the-password")):
            sasl = {
                "security-protocol": "sasl_plaintext",
                "sasl-mechanism": "SCRAM-SHA-512",
                "sasl-username": SCRAM_USER,
            }
            made = http.post(
                f"{server.url}{SINKS}",
                json={
                    "name": name,
                    "kind": "kafka",
                    "url": f"kafka://{kafka_broker.sasl_bootstrap}",
                    "kafka": {"topic": name, **sasl, "sasl-password": password},
                    "filters": {"catalog-objects-by-name": [[namespace]]},
                },
            )
            assert made.status_code == 201, made.text
        assert http.post(f"{base}/namespaces", json={"namespace": [namespace]}).status_code == 200
        for table in tables:
            assert http.post(f"{base}/namespaces/{namespace}/tables", json=create_request(table)).status_code == 200

    stop = threading.Event()
    permits = threading.Semaphore(0)  # one commit each: the phases below release them
    acknowledged: list[str] = []

    def commit(table: str) -> None:
        with httpx.Client(timeout=60) as http:
            number = 0
            while not stop.is_set():
                if not permits.acquire(timeout=0.1):
                    continue
                number += 1
                body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"n": str(number)}}]}
                response = http.post(f"{base}/namespaces/{namespace}/tables/{table}", json=body)
                assert response.status_code == 200, response.text
                acknowledged.append(response.json()["metadata-location"])

    def commits(count: int, what: str) -> None:
        goal = len(acknowledged) + count
        permits.release(count)
        wait_for(lambda: len(acknowledged) >= goal, what, 30)

    def newest(conn: psycopg.Connection) -> int:
        return conn.execute(
            "SELECT max(e.position) FROM change_event e JOIN warehouse w ON w.id = e.stream WHERE w.name = %s",
            (server.warehouse,),
        ).fetchone()[0]

    def cursor(conn: psycopg.Connection, sink: str = namespace) -> int:
        row = conn.execute(
            "SELECT c.position FROM event_sink_cursor c JOIN event_sink s ON s.id = c.sink_id"
            " JOIN warehouse w ON w.id = c.stream WHERE s.name = %s AND w.name = %s",
            (sink, server.warehouse),
        ).fetchone()
        return row[0] if row else 0

    committers = [threading.Thread(target=commit, args=(table,)) for table in tables]
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        denied_start = cursor(conn, f"{namespace}-denied")
        for thread in committers:
            thread.start()
        try:
            commits(PER_PHASE, "commits")
            end = newest(conn)
            wait_for(lambda: cursor(conn) >= end, "the first deliveries", 30)
            kafka_broker.stop()  # the broker gone mid-stream: the sink waits, commits go on
            commits(PER_PHASE, "commits while Kafka is down")
            assert cursor(conn) <= end < newest(conn)  # what the broker could not acknowledge is ahead
            kafka_broker.start()
            commits(PER_PHASE, "commits after Kafka is back")
        finally:
            stop.set()
            for thread in committers:
                thread.join()
        rows = conn.execute(
            "SELECT e.event_id::text, e.name, e.position, e.object_uuid::text FROM change_event e"
            " JOIN warehouse w ON w.id = e.stream WHERE w.name = %s AND e.namespace = %s ORDER BY e.position",
            (server.warehouse, [namespace]),
        ).fetchall()
        end = rows[-1][2]
        wait_for(lambda: cursor(conn) >= end, "the sink's cursor at the end of the feed", 30)
        received = read_topic(kafka_broker.bootstrap, topic)
        wait_for(lambda: cursor(conn, f"{namespace}-sasl") >= end, "the SASL sink's cursor at the end", 30)
        over_sasl = read_topic(kafka_broker.bootstrap, f"{namespace}-sasl")
        assert {event["id"] for *_, event in over_sasl} == {row[0] for row in rows}
        assert cursor(conn, f"{namespace}-denied") == denied_start

        # every event, once at least, each record's ce_id its event's id
        assert all(headers["ce_id"].decode() == event["id"] for _, _, headers, event in received)
        assert all(headers["content-type"].startswith(b"application/cloudevents+json") for _, _, headers, _ in received)
        assert {event["id"] for _, _, _, event in received} == {row[0] for row in rows}
        assert len(rows) >= len(acknowledged) + len(tables) + 1  # the commits, the creations
        for table in tables:  # per table: the feed's order, under the table's uuid, in one partition
            expected = [row[0] for row in rows if row[1] == table]
            mine = [
                (partition, key, event)
                for partition, key, _, event in received
                if event.get("subject") == f"{namespace}.{table}"
            ]
            assert list(dict.fromkeys(event["id"] for _, _, event in mine)) == expected, table
            uuids = {row[3] for row in rows if row[1] == table}
            assert {key.decode() for _, key, _ in mine} == uuids and len(uuids) == 1, table
            assert len({partition for partition, _, _ in mine}) == 1, table

        # a repeat: the cursor moved back over the last three events, as if the publisher had died
        # between the broker's acknowledgement and its cursor; they arrive again, ids unchanged
        conn.execute(
            "UPDATE event_sink_cursor c SET position = %s FROM event_sink s"
            " WHERE s.id = c.sink_id AND s.name = %s AND c.stream = (SELECT id FROM warehouse WHERE name = %s)",
            (end - 3, namespace, server.warehouse),
        )
        wait_for(lambda: cursor(conn) >= end, "the repeat", 30)
    again = read_topic(kafka_broker.bootstrap, topic)
    repeated = {row[0] for row in rows if row[2] > end - 3}
    assert repeated and len(again) == len(received) + len(repeated)
    copies: dict[str, list] = {}
    for _, key, headers, event in again:
        assert headers["ce_id"].decode() == event["id"]
        copies.setdefault(event["id"], []).append((key, event))
    assert {event_id for event_id, found in copies.items() if len(found) > 1} == repeated
    assert all(found[0] == copy for found in copies.values() for copy in found)  # same key, same value

    example = subprocess.run(
        [sys.executable, str(REPO / "examples" / "kafka_consumer.py"), kafka_broker.bootstrap, topic, "--drain"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert example.returncode == 0, example.stderr
    lines = example.stdout.splitlines()  # every event once
    assert sorted(int(line.split()[0]) for line in lines) == [row[2] for row in rows]
    assert f"{rows[0][2]} create-namespace {namespace}" in lines  # in a partition of its own key: order per object
    with httpx.Client(timeout=60) as http:
        for name in (namespace, f"{namespace}-sasl", f"{namespace}-denied"):
            assert http.delete(f"{server.url}{SINKS}/{name}").status_code == 204
