"""The ``requirements`` and ``updates`` of a CommitTableRequest, parsed into PyIceberg's models
(BadRequest on an unknown type or a bad field)."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import TypeAdapter
from pyiceberg.table.update import (
    TableRequirement,
)

from app.ground.errors import BadRequest
from app.rules.describe import describe_error
from app.rules.table.models import INVALID, REQUIREMENT_ADAPTER, UPDATE_ADAPTER, TableUpdate


def parse_requirements(raw: list[dict[str, Any]]) -> list[TableRequirement]:
    """Parse a CommitTableRequest's ``requirements`` (BadRequest on an unknown type or bad field)."""
    return [_parse_item(REQUIREMENT_ADAPTER, item, "requirement", "type", i) for i, item in enumerate(_as_list(raw))]


def parse_updates(raw: list[dict[str, Any]]) -> list[TableUpdate]:
    """Parse a CommitTableRequest's ``updates`` (BadRequest on an unknown action or bad field)."""
    items = _as_list(raw)
    return [_parse_item(UPDATE_ADAPTER, _prepare_update(item), "update", "action", i) for i, item in enumerate(items)]


def _as_list(raw: object) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest("Invalid commit: requirements and updates must be arrays")
    return raw


def _parse_item(adapter: TypeAdapter[Any], item: object, kind: str, tag: str, index: int) -> Any:
    if not isinstance(item, dict):
        raise BadRequest(f"Invalid table {kind} #{index}: expected an object")
    try:
        return adapter.validate_python(item)
    except INVALID as exc:
        raise BadRequest(f"Invalid table {kind} #{index} ({item.get(tag)}): {describe_error(exc)}") from exc


def _prepare_update(item: object) -> object:
    """Give add-spec fields without a ``field-id`` (optional in the spec) a negative placeholder.

    PyIceberg requires the id; the real one is assigned from ``last-partition-id`` when the
    update is applied (see ``_assign_missing_partition_field_ids``).
    """
    if not isinstance(item, dict) or item.get("action") != "add-spec" or not isinstance(item.get("spec"), dict):
        return item
    return {**item, "spec": spec_with_placeholder_ids(item["spec"])}


def spec_with_placeholder_ids(spec: dict[str, Any]) -> dict[str, Any]:
    fields = spec.get("fields")
    if not isinstance(fields, list):
        return spec
    placeholders = (-(i + 1) for i in itertools.count())
    return {
        **spec,
        "fields": [
            {**f, "field-id": next(placeholders)} if isinstance(f, dict) and f.get("field-id") is None else f
            for f in fields
        ],
    }
