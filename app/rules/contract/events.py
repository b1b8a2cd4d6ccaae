# Generated from openapi/events.yaml by scripts/models.py (`make models`): do not edit.
# tests/unit/test_contract_models.py fails when this file differs from a regeneration.

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, RootModel

from app.rules.contract.shapes import ContractModel, NamespacePaths, Strings


class CatalogObjectIdentifierItem(RootModel[str]):
    root: Annotated[str, Field(max_length=1024)]


class CatalogObjectType(RootModel[Literal["namespace", "table", "view"]]):
    root: Literal["namespace", "table", "view"]


class EventOperationType(
    RootModel[
        Literal[
            "create-table",
            "register-table",
            "drop-table",
            "update-table",
            "rename-table",
            "create-view",
            "drop-view",
            "update-view",
            "rename-view",
            "create-namespace",
            "update-namespace-properties",
            "drop-namespace",
            "custom",
        ]
    ]
):
    root: Literal[
        "create-table",
        "register-table",
        "drop-table",
        "update-table",
        "rename-table",
        "create-view",
        "drop-view",
        "update-view",
        "rename-view",
        "create-namespace",
        "update-namespace-properties",
        "drop-namespace",
        "custom",
    ]


class Actor(ContractModel):
    model_config = ConfigDict(
        extra="allow",
    )


class EventOperation(ContractModel):
    model_config = ConfigDict(
        extra="allow",
    )
    operation_type: Annotated[EventOperationType, Field(alias="operation-type")]


class QueryEventsRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    continuation_token: Annotated[
        str | None,
        Field(
            alias="continuation-token",
            description="Where the previous answer stopped; absent to start from the oldest retained event.",
            max_length=1024,
        ),
    ] = None
    page_size: Annotated[
        int | None,
        Field(
            alias="page-size",
            description="At most this many events (the server caps it at its page size limit).",
            ge=1,
            le=2147483647,
        ),
    ] = None
    since_timestamp_ms: Annotated[
        int | None,
        Field(
            alias="since-timestamp-ms",
            description="Only events committed at or after this time.",
            ge=0,
            le=253402300799999,
        ),
    ] = None
    operation_types: Annotated[Strings, Field(alias="operation-types", max_length=32)] = []
    catalog_objects_by_name: Annotated[
        NamespacePaths,
        Field(
            alias="catalog-objects-by-name",
            description="Only events about objects whose identifier (namespace levels, then the name) starts with one of these.",
            max_length=100,
        ),
    ] = []
    catalog_objects_by_uuid: Annotated[
        Strings,
        Field(
            alias="catalog-objects-by-uuid",
            description="Only events about the tables or views with one of these uuids.",
            max_length=100,
        ),
    ] = []
    object_types: Annotated[Strings, Field(alias="object-types", max_length=8)] = []
    custom_filters: Annotated[
        dict[str, Any],
        Field(
            alias="custom-filters",
            description="Implementation-specific filters. Growler has none, and refuses any (400).",
        ),
    ] = {}


class Event(ContractModel):
    event_id: Annotated[str, Field(alias="event-id")]
    request_id: Annotated[
        str,
        Field(
            alias="request-id",
            description="Shared by the events of one request (one per table of a multi-table transaction).",
        ),
    ]
    request_event_count: Annotated[
        int, Field(alias="request-event-count", description="How many events the request made.")
    ]
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms")]
    actor: Actor | None = None
    operation: EventOperation


class QueryEventsResponse(ContractModel):
    continuation_token: Annotated[
        str,
        Field(
            alias="continuation-token", description="Always present; the next request continues (or polls) from here."
        ),
    ]
    events: list[Event]
