"""queryEvents' request body: the generated model of ``openapi/events.yaml`` (the change feed
proposed in apache/iceberg pull request 12584, which PyIceberg has no model for).

Every filter is a tuple, empty when left out (scripts/models.py's overrides); ``custom-filters``
is kept so the feed can refuse a non-empty one (Growler has none)."""

from __future__ import annotations

from app.rules.contract.events import QueryEventsRequest

__all__ = ["QueryEventsRequest"]
