"""A JetStream consumer of Growler's change feed (docs/events.md).

Growler publishes each event as a structured CloudEvent to the stream ``GROWLER``, subject
``growler.<warehouse>.<namespace levels...>.<table or view>`` (``_`` for a namespace's own
events), with ``Nats-Msg-Id`` = the event id. Delivery is at least once and in commit order per
warehouse: a durable consumer acknowledges what it handled and resumes there after a restart; an
event id seen before is a duplicate.

    python examples/nats_consumer.py nats://127.0.0.1:4222 'growler.warehouse.>' [--drain]

prints ``<position> <operation-type> <subject>`` per event; ``--drain`` stops once nothing new
arrived for two seconds.
"""

from __future__ import annotations

import asyncio
import json
import sys

import nats
from nats.errors import TimeoutError as NatsTimeout


async def consume(url: str, subjects: str, drain: bool) -> None:
    connection = await nats.connect(url)
    jetstream = connection.jetstream()
    for attempt in range(10):  # JetStream may still be starting (a server just restarted)
        try:
            subscription = await jetstream.pull_subscribe(subjects, durable="example-consumer", stream="GROWLER")
            break
        except nats.errors.Error:
            if attempt == 9:
                raise
            await asyncio.sleep(1)
    seen: set[str] = set()
    while True:
        try:
            messages = await subscription.fetch(100, timeout=2)
        except (TimeoutError, NatsTimeout):  # nats-py raises either when nothing came in time
            if drain:
                break
            continue
        for message in messages:
            event = json.loads(message.data)
            if event["id"] not in seen:  # at least once: a redelivery carries the same id
                seen.add(event["id"])
                print(event["sequence"], event["data"]["operation"]["operation-type"], message.subject, flush=True)
            await message.ack()
    await connection.close()


if __name__ == "__main__":
    asyncio.run(consume(sys.argv[1], sys.argv[2], "--drain" in sys.argv[3:]))
