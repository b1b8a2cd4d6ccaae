"""What the view-rule tests share: ids, schemas, and builders of versions, requests and views."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.ground.errors import BadRequest
from app.rules import view as vm
from app.rules.requests.views import CommitViewRequest, CreateViewRequest

VIEW_UUID = "6b0c5d3e-2f7a-4c1b-9e8d-0a1b2c3d4e5f"
OTHER_UUID = "11111111-2222-4333-8444-555555555555"
LOCATION = "s3://bucket/db/v"
T0 = 1_700_000_000_000
NOW = T0 + 60_000

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 7,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "data", "type": "string", "required": False},
    ],
}
OTHER_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "total", "type": "double", "required": False}],
}


def sql(text: str, dialect: str = "spark") -> dict[str, str]:
    return {"type": "sql", "sql": text, "dialect": dialect}


def version(*representations: dict, schema_id: int = 0, version_id: int = 1, ts: int = T0, **extra: Any) -> dict:
    body = {
        "version-id": version_id,
        "timestamp-ms": ts,
        "schema-id": schema_id,
        "summary": {"engine-name": "spark"},
        "default-namespace": ["db"],
        "representations": list(representations) or [sql("SELECT id, data FROM db.t")],
    }
    body.update(extra)
    return body


def create_request(**extra: Any) -> dict[str, Any]:
    body = {
        "name": "v",
        "schema": copy.deepcopy(SCHEMA),
        "view-version": version(schema_id=99, version_id=42),
        "properties": {"comment": "a view"},
    }
    body.update(extra)
    return body


def created(request: dict[str, Any]) -> vm.ViewMetadata:
    """A view's first metadata from a createView body, parsed as the edge parses it."""
    definition = CreateViewRequest.from_body(request).definition
    return vm.new_view_metadata(definition, location=LOCATION, now_ms=T0, view_uuid=VIEW_UUID)


def new_view(**extra: Any) -> vm.ViewMetadata:
    return created(create_request(**extra))


def apply(base: vm.ViewMetadata, *updates: dict, requirements: list[dict] | None = None) -> vm.ViewMetadata:
    """One replaceView body, parsed as the edge parses it, then committed onto ``base``."""
    request = CommitViewRequest.from_body({"requirements": requirements or [], "updates": list(updates)})
    return vm.commit(base, request.requirements, request.updates, now_ms=NOW)


def bad(base: vm.ViewMetadata, *updates: dict, requirements: list[dict] | None = None) -> str:
    before = copy.deepcopy(base)
    with pytest.raises(BadRequest) as info:
        apply(base, *updates, requirements=requirements)
    assert info.value.code == 400
    assert base == before, "a rejected commit must not touch its base"
    return info.value.message


def replace(base: vm.ViewMetadata, query: str, *, dialect: str = "spark") -> vm.ViewMetadata:
    """What a Java client sends to replace a view: a new schema, a version using it, made current."""
    return apply(
        base,
        {"action": "add-schema", "schema": OTHER_SCHEMA},
        {"action": "add-view-version", "view-version": version(sql(query, dialect), schema_id=-1, version_id=0)},
        {"action": "set-current-view-version", "view-version-id": -1},
    )
