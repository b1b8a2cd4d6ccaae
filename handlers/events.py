"""The change feed (openapi/events.yaml): ``POST /v1/{prefix}/events``, a thin handler."""

from __future__ import annotations

from app.composition.services import Services
from app.rules.requests.events import QueryEventsRequest


def query_events(services: Services, prefix: str, body: QueryEventsRequest):
    page = services.events.query(prefix, body)
    return {"continuation-token": page.continuation_token, "events": page.events}, 200
