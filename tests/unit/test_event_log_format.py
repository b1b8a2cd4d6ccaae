"""The JSON log line's timestamp: the same text datetime's isoformat gives, cached per second."""

from __future__ import annotations

import datetime
import json
import logging
import random

from app.ground.events import JsonFormatter


def expected(created: float) -> str:
    moment = datetime.datetime.fromtimestamp(created, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def line(formatter: JsonFormatter, created: float) -> dict:
    record = logging.LogRecord("growler.request", logging.INFO, "", 0, "request", None, None)
    record.created = created
    record.fields = {"event": "request", "status": 200}
    return json.loads(formatter.format(record))


def test_timestamps_match_datetime_including_roundings_at_the_edges():
    formatter = JsonFormatter()
    rng = random.Random(20)
    edges = [1_764_000_000.0, 1_764_000_000.9995, 1_764_000_000.9999995, 1_764_000_000.9999996, 1_764_000_001.0005]
    moments = edges + [1_764_000_000 + rng.random() * 86_400 * 400 for _ in range(5000)]
    moments += [1_764_000_000 + n / 1000 + 0.0000005 for n in range(2000)]  # half-microseconds: even rounding
    for created in moments:
        assert line(formatter, created)["ts"] == expected(created), created


def test_a_line_keeps_its_shape():
    doc = line(JsonFormatter(), 1_764_047_587.123456)
    assert doc == {
        "ts": "2025-11-25T05:13:07.123Z",
        "level": "INFO",
        "logger": "growler.request",
        "msg": "request",
        "event": "request",
        "status": 200,
    }
