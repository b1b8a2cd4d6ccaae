"""queryEvents' request body, from ``openapi/events.yaml`` (the change feed proposed in
apache/iceberg pull request 12584, which PyIceberg has no model for)."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pyiceberg.typedef import IcebergBaseModel


class QueryEventsRequest(IcebergBaseModel):
    """Where to continue from, how many, and the filters (each empty: no filter). ``custom-filters``
    is kept so the feed can refuse a non-empty one (Growler has none)."""

    continuation_token: str | None = Field(default=None, alias="continuation-token")
    page_size: int | None = Field(default=None, alias="page-size")
    since_timestamp_ms: int | None = Field(default=None, alias="since-timestamp-ms")
    operation_types: tuple[str, ...] = Field(default=(), alias="operation-types")
    object_types: tuple[str, ...] = Field(default=(), alias="object-types")
    catalog_objects_by_uuid: tuple[str, ...] = Field(default=(), alias="catalog-objects-by-uuid")
    catalog_objects_by_name: tuple[tuple[str, ...], ...] = Field(default=(), alias="catalog-objects-by-name")
    custom_filters: dict[str, Any] = Field(default_factory=dict, alias="custom-filters")
