"""The change feed (openapi/events.yaml): ``POST /v1/{prefix}/events``, a thin handler."""

from __future__ import annotations

from typing import Any

from app.edge.context import events


def query_events(prefix: str, body: dict[str, Any]):
    page = events().query(prefix, body)
    return {"continuation-token": page.continuation_token, "events": page.events}, 200
