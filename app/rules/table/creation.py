"""Creating a table: the first metadata from a CreateTableRequest, or, for a staged create, the
empty table the commit's updates are applied to and what they may leave out."""

from __future__ import annotations

import json
import uuid
from typing import Any, Protocol

from pyiceberg.partitioning import (
    PARTITION_FIELD_ID_START,
    PartitionSpec,
    assign_fresh_partition_spec_ids,
)
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, UNSORTED_SORT_ORDER_ID, SortOrder, assign_fresh_sort_order_ids
from pyiceberg.table.update import (
    UpgradeFormatVersionUpdate,
)

from app.ground.errors import BadRequest, invalid_metadata
from app.rules.describe import describe_error
from app.rules.metadata_files import COMPRESSION_CODEC, FILE_SUFFIX_BY_CODEC
from app.rules.table.changes import Changes
from app.rules.table.models import (
    DEFAULT_FORMAT_VERSION,
    FORMAT_VERSION_PROPERTY,
    FORMAT_VERSIONS,
    INVALID,
    MODEL_BY_VERSION,
    PREVIOUS_VERSIONS_MAX,
    RESERVED_PROPERTIES,
)
from app.rules.table.schemas import assign_fresh_schema_ids, validate_schema, validate_spec
from app.rules.table.serialisation import metadata_from_dict


class TableDefinition(Protocol):
    """What a new table is made of: a createTable request, parsed (``app.rules.requests.tables``)."""

    @property
    def table_schema(self) -> Schema: ...
    @property
    def partition_spec(self) -> PartitionSpec | None: ...
    @property
    def write_order(self) -> SortOrder | None: ...
    @property
    def properties(self) -> dict[str, str]: ...


def new_table_metadata(
    definition: TableDefinition, *, location: str, now_ms: int, table_uuid: str | None = None
) -> TableMetadata:
    """The first metadata of a table, from a parsed CreateTableRequest.

    Like Java's ``TableMetadata.newTableMetadata``: columns renumbered 1..n, partition fields
    1000.., the sort order 1 (0 when unsorted), ``format-version`` taken out of the properties
    (default 2) along with the other reserved properties. ``location`` is the resolved table
    location (the request's own ``location`` is the caller's business).
    """
    format_version = requested_format_version(definition.properties.get(FORMAT_VERSION_PROPERTY))
    properties = {key: value for key, value in definition.properties.items() if key not in RESERVED_PROPERTIES}
    schema = definition.table_schema
    spec = definition.partition_spec or PartitionSpec(spec_id=0)
    order = definition.write_order or UNSORTED_SORT_ORDER
    try:
        validate_properties(properties)
        validate_schema(schema, format_version)
        fresh_schema = assign_fresh_schema_ids(schema)
        fresh_spec = assign_fresh_partition_spec_ids(spec, schema, fresh_schema)
        validate_spec(fresh_spec, fresh_schema, format_version)
        fresh_order = assign_fresh_sort_order_ids(order, schema, fresh_schema)
        fresh_order.check_compatible(fresh_schema)
    except INVALID as exc:
        raise invalid_metadata(f"Invalid table definition: {describe_error(exc)}", exc) from exc
    data: dict[str, Any] = {
        "format-version": format_version,
        "table-uuid": table_uuid or str(uuid.uuid4()),
        "location": location,
        "last-updated-ms": now_ms,
        "last-column-id": fresh_schema.highest_field_id,
        "schemas": [fresh_schema.model_dump(mode="json")],
        "current-schema-id": fresh_schema.schema_id,
        "partition-specs": [fresh_spec.model_dump(mode="json")],
        "default-spec-id": fresh_spec.spec_id,
        "last-partition-id": fresh_spec.last_assigned_field_id,
        "sort-orders": [fresh_order.model_dump(mode="json")],
        "default-sort-order-id": fresh_order.order_id,
        "properties": properties,
    }
    if format_version == 1:
        data["schema"] = data["schemas"][0]
        data["partition-spec"] = data["partition-specs"][0]["fields"]
    return metadata_from_dict(data, "Invalid table definition")


def string_properties(raw: object) -> dict[str, str]:
    """A createTable request's ``properties``, every value a string (a request model's parse)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
        raise BadRequest("Invalid properties: expected an object of strings")
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in raw.items()}


def requested_format_version(raw: str | None) -> int:
    """The ``format-version`` property asked for (default 2); refused when Growler cannot write it."""
    if raw is None:
        return DEFAULT_FORMAT_VERSION
    try:
        version = int(raw.strip())
    except ValueError:
        raise BadRequest(f"Invalid format-version: {raw!r}") from None
    if version not in FORMAT_VERSIONS:
        raise BadRequest(f"Unsupported format-version: {version} (supported: 1, 2, 3)")
    return version


def parse_part(model: type[Any], raw: object, what: str) -> Any:
    """One part of a request (schema, partition spec, sort order); a refusal names the part."""
    if not isinstance(raw, dict):
        raise BadRequest(f"Invalid {what}: expected an object")
    try:
        return model.model_validate(raw)
    except INVALID as exc:
        raise BadRequest(f"Invalid {what}: {describe_error(exc)}") from exc


def validate_properties(properties: dict[str, str]) -> None:
    """Reject values this module would later fail on (file name, metadata log size)."""
    if COMPRESSION_CODEC in properties and properties[COMPRESSION_CODEC].lower() not in FILE_SUFFIX_BY_CODEC:
        raise ValueError(f"Unsupported {COMPRESSION_CODEC}: {properties[COMPRESSION_CODEC]} (use none or gzip)")
    if PREVIOUS_VERSIONS_MAX in properties:
        try:
            int(properties[PREVIOUS_VERSIONS_MAX])
        except ValueError:
            value = properties[PREVIOUS_VERSIONS_MAX]
            raise ValueError(f"{PREVIOUS_VERSIONS_MAX} must be an integer: {value}") from None


def empty_metadata(updates: list[Any]) -> TableMetadata:
    """An empty table to build a staged create on; ids -1 until the updates set them."""
    requested = next((u.format_version for u in updates if isinstance(u, UpgradeFormatVersionUpdate)), None)
    format_version = requested if requested in FORMAT_VERSIONS else DEFAULT_FORMAT_VERSION
    values: dict[str, Any] = {
        "format_version": format_version,
        "location": "",
        "table_uuid": uuid.uuid4(),
        "last_updated_ms": 0,
        "last_column_id": 0,
        "current_schema_id": -1,
        "default_spec_id": -1,
        "last_partition_id": PARTITION_FIELD_ID_START - 1,
        "default_sort_order_id": -1,
    }
    if format_version == 1:
        values.update(schema_=Schema(), partition_spec=[])
    return MODEL_BY_VERSION[format_version].model_construct(**values)


def complete_new_table(metadata: TableMetadata, changes: Changes, default_location: str | None) -> TableMetadata:
    """Fill what a staged create may leave out (unpartitioned, unsorted) and check the rest."""
    if not metadata.schemas:
        raise BadRequest("Cannot create a table without a schema: add-schema is required")
    values: dict[str, Any] = {}
    if metadata.schema_by_id(metadata.current_schema_id) is None:
        values["current_schema_id"] = metadata.schemas[-1].schema_id
    if not metadata.partition_specs:
        values.update(partition_specs=[PartitionSpec(spec_id=0)], default_spec_id=0)
    elif metadata.default_spec_id not in metadata.specs():
        values["default_spec_id"] = metadata.partition_specs[-1].spec_id
    if not metadata.sort_orders:
        values.update(sort_orders=[UNSORTED_SORT_ORDER], default_sort_order_id=UNSORTED_SORT_ORDER_ID)
    elif metadata.sort_order_by_id(metadata.default_sort_order_id) is None:
        values["default_sort_order_id"] = metadata.sort_orders[-1].order_id
    if not metadata.location:
        if not default_location:
            raise BadRequest("Cannot create a table without a location: set-location is required")
        values["location"] = default_location
    return metadata.model_copy(update=values)
