"""A Kafka consumer of Growler's change feed (docs/events.md), with confluent-kafka.

Growler produces each event as a structured CloudEvent (JSON value, ``content-type:
application/cloudevents+json``) to the sink's topic, keyed by the object's uuid (a namespace's
events by ``<warehouse>/<namespace>``), with the event id in the ``ce_id`` header. Delivery is at
least once and in commit order per object: a consumer group commits what it handled and resumes
there after a restart; an event id seen before is a duplicate (here: remembered in memory; a real
consumer keeps them with what it wrote, or makes its handling idempotent).

    python examples/kafka_consumer.py 127.0.0.1:9092 growler.warehouse [--drain]

prints ``<position> <operation-type> <subject>`` per event; ``--drain`` stops once nothing new
arrived for two seconds.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import Consumer


def consume(bootstrap: str, topic: str, drain: bool) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "example-consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,  # committed after handling: at least once
        }
    )
    consumer.subscribe([topic])
    seen: set[str] = set()
    idle, assigned = 0.0, False
    try:
        while not (drain and assigned and idle >= 2):
            message = consumer.poll(0.5)
            assigned = assigned or bool(consumer.assignment())
            if message is None:
                idle += 0.5 if assigned else 0.0
                continue
            idle = 0.0
            if message.error():
                continue
            event_id = dict(message.headers() or [])["ce_id"].decode()
            if event_id not in seen:  # at least once: a redelivery carries the same id
                seen.add(event_id)
                event = json.loads(message.value())
                print(
                    event["sequence"],
                    event["data"]["operation"]["operation-type"],
                    event.get("subject", "-"),
                    flush=True,
                )
            consumer.commit(message, asynchronous=False)
    finally:
        consumer.close()


if __name__ == "__main__":
    consume(sys.argv[1], sys.argv[2], "--drain" in sys.argv[3:])
