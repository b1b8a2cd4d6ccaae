"""Schema evolution: schemas, partition specs and sort orders, validated, renumbered and
added as Java's ``TableMetadata.Builder`` does; the update handlers that change them."""

from __future__ import annotations

import itertools

from pyiceberg.partitioning import (
    PARTITION_FIELD_ID_START,
    PartitionField,
    PartitionSpec,
    validate_partition_name,
)
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, UNSORTED_SORT_ORDER_ID, SortOrder
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSortOrderUpdate,
    RemovePartitionSpecsUpdate,
    RemoveSchemasUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
)
from pyiceberg.types import IcebergType, ListType, MapType, StructType

from app.rules.schema_fields import duplicate_field_ids
from app.rules.table.changes import Changes, Handler, apply_with_pyiceberg, resolve_last_added


def validate_schema(schema: Schema, format_version: int) -> None:
    """Unique field ids, and only types and defaults the format version supports (Java's checks)."""
    duplicates = duplicate_field_ids(schema)
    if duplicates:
        raise ValueError(f"Invalid schema: duplicate field ids {duplicates}")
    schema.check_format_version_compatibility(format_version)
    if format_version < 3:
        for nested in index_by_id(schema).values():
            if nested.initial_default is not None:
                raise ValueError(
                    f"Invalid initial default for {nested.name}: non-null default is not supported until v3"
                )


def _same_schema(a: Schema, b: Schema) -> bool:
    """Java's ``Schema.sameSchema``: same columns and identifier fields, whatever the schema id."""
    return a.columns == b.columns and set(a.identifier_field_ids) == set(b.identifier_field_ids)


def assign_fresh_schema_ids(schema: Schema) -> Schema:
    """Renumber every field 1..n in Java's order (a struct's fields first, then each one's children).

    Same order as PyIceberg's ``assign_fresh_schema_ids``, which however drops ``initial-default``
    and ``write-default``; here each field is copied with only its id and type replaced.
    """
    counter = itertools.count(1)
    old_to_new: dict[int, int] = {}

    def fresh_id(old: int) -> int:
        old_to_new[old] = next(counter)
        return old_to_new[old]

    def fresh(field_type: IcebergType) -> IcebergType:
        if isinstance(field_type, StructType):
            new_ids = [fresh_id(f.field_id) for f in field_type.fields]
            return StructType(
                *[
                    f.model_copy(update={"field_id": new_id, "field_type": fresh(f.field_type)})
                    for new_id, f in zip(new_ids, field_type.fields, strict=True)
                ]
            )
        if isinstance(field_type, ListType):
            element_id = fresh_id(field_type.element_id)
            return ListType(element_id, fresh(field_type.element_type), field_type.element_required)
        if isinstance(field_type, MapType):
            key_id, value_id = fresh_id(field_type.key_id), fresh_id(field_type.value_id)
            key_type, value_type = fresh(field_type.key_type), fresh(field_type.value_type)
            return MapType(key_id, key_type, value_id, value_type, field_type.value_required)
        return field_type

    struct = fresh(schema.as_struct())
    assert isinstance(struct, StructType)
    identifiers = [old_to_new[field_id] for field_id in schema.identifier_field_ids]
    return Schema(*struct.fields, schema_id=0, identifier_field_ids=identifiers)


def validate_spec(spec: PartitionSpec, schema: Schema, format_version: int) -> None:
    """Java's checks when binding a spec: sources, transforms, unique names and ids, v1 ids."""
    spec.check_compatible(schema)
    names: set[str] = set()
    ids: set[int] = set()
    for partition_field in spec.fields:
        if not partition_field.name:
            raise ValueError("Cannot use empty partition name")
        if partition_field.name in names:
            raise ValueError(f"Cannot use partition name more than once: {partition_field.name}")
        if partition_field.field_id in ids:
            raise ValueError(f"Cannot use partition field id more than once: {partition_field.field_id}")
        names.add(partition_field.name)
        ids.add(partition_field.field_id)
        # PyIceberg's name-vs-schema conflict rule (identity may reuse its own column's name).
        validate_partition_name(
            partition_field.name, partition_field.transform, partition_field.source_id, schema, set()
        )
    sequential = list(range(PARTITION_FIELD_ID_START, PARTITION_FIELD_ID_START + len(spec.fields)))
    if format_version == 1 and [f.field_id for f in spec.fields] != sequential:
        raise ValueError(f"Spec does not use sequential IDs that are required in v1: {spec}")


def _assign_missing_partition_field_ids(spec: PartitionSpec, last_partition_id: int | None) -> PartitionSpec:
    """Replace the placeholders of ``_prepare_update`` with ids above every assigned one."""
    if all(f.field_id >= 0 for f in spec.fields):
        return spec
    floor = PARTITION_FIELD_ID_START - 1 if last_partition_id is None else last_partition_id
    highest = max([floor, *(f.field_id for f in spec.fields)])
    next_ids = itertools.count(highest + 1)
    fields = [
        f if f.field_id >= 0 else PartitionField(f.source_id, next(next_ids), f.transform, f.name) for f in spec.fields
    ]
    return PartitionSpec(*fields, spec_id=spec.spec_id)


def _current_schema(metadata: TableMetadata, changes: Changes) -> Schema:
    """The schema a spec or sort order is checked against: the current one, or - for a table
    being created that has none yet - the one this commit added (DuckDB sends ``add-spec`` and
    ``add-sort-order`` before ``set-current-schema``)."""
    schema = metadata.schema_by_id(metadata.current_schema_id)
    if schema is None and changes.last_added_schema_id is not None:
        schema = metadata.schema_by_id(changes.last_added_schema_id)
    if schema is None:
        raise ValueError("table has no current schema: add-schema and set-current-schema must come first")
    return schema


def _add_schema(metadata: TableMetadata, update: AddSchemaUpdate, changes: Changes) -> TableMetadata:
    schema = update.schema_
    validate_schema(schema, metadata.format_version)
    last_column_id = max(metadata.last_column_id, schema.highest_field_id)
    existing = next((s for s in metadata.schemas if _same_schema(s, schema)), None)
    if existing is not None:
        changes.last_added_schema_id = existing.schema_id
        return metadata.model_copy(update={"last_column_id": last_column_id})
    new_id = max((s.schema_id for s in metadata.schemas), default=-1) + 1
    changes.last_added_schema_id = new_id
    return metadata.model_copy(
        update={
            "schemas": [*metadata.schemas, schema.model_copy(update={"schema_id": new_id})],
            "last_column_id": last_column_id,
        }
    )


def _set_current_schema(metadata: TableMetadata, update: SetCurrentSchemaUpdate, changes: Changes) -> TableMetadata:
    schema_id = resolve_last_added(update.schema_id, changes.last_added_schema_id, "schema")
    if schema_id == metadata.current_schema_id:
        return metadata
    if metadata.schema_by_id(schema_id) is None:
        raise ValueError(f"Cannot set current schema to unknown schema: {schema_id}")
    return metadata.model_copy(update={"current_schema_id": schema_id})


def _add_spec(metadata: TableMetadata, update: AddPartitionSpecUpdate, changes: Changes) -> TableMetadata:
    spec = _assign_missing_partition_field_ids(update.spec, metadata.last_partition_id)
    validate_spec(spec, _current_schema(metadata, changes), metadata.format_version)
    existing = next((s for s in metadata.partition_specs if s.compatible_with(spec)), None)
    if existing is not None:
        changes.last_added_spec_id = existing.spec_id
        return metadata
    new_spec = PartitionSpec(*spec.fields, spec_id=max((s.spec_id for s in metadata.partition_specs), default=-1) + 1)
    last_partition_id = metadata.last_partition_id
    if last_partition_id is None:
        last_partition_id = PARTITION_FIELD_ID_START - 1
    changes.last_added_spec_id = new_spec.spec_id
    return metadata.model_copy(
        update={
            "partition_specs": [*metadata.partition_specs, new_spec],
            "last_partition_id": max(last_partition_id, new_spec.last_assigned_field_id),
        }
    )


def _set_default_spec(metadata: TableMetadata, update: SetDefaultSpecUpdate, changes: Changes) -> TableMetadata:
    spec_id = resolve_last_added(update.spec_id, changes.last_added_spec_id, "partition spec")
    if spec_id == metadata.default_spec_id:
        return metadata
    if spec_id not in metadata.specs():
        raise ValueError(f"Cannot set default partition spec to unknown spec: {spec_id}")
    return metadata.model_copy(update={"default_spec_id": spec_id})


def _add_sort_order(metadata: TableMetadata, update: AddSortOrderUpdate, changes: Changes) -> TableMetadata:
    order = update.sort_order
    if order.is_unsorted:
        existing = metadata.sort_order_by_id(UNSORTED_SORT_ORDER_ID)
        new_order = UNSORTED_SORT_ORDER
    else:
        order.check_compatible(_current_schema(metadata, changes))
        existing = next((o for o in metadata.sort_orders if o.fields == order.fields), None)
        new_id = max(1, max((o.order_id for o in metadata.sort_orders), default=0) + 1)
        new_order = SortOrder(*order.fields, order_id=new_id)
    if existing is not None:
        changes.last_added_order_id = existing.order_id
        return metadata
    changes.last_added_order_id = new_order.order_id
    return metadata.model_copy(update={"sort_orders": [*metadata.sort_orders, new_order]})


def _set_default_sort_order(
    metadata: TableMetadata, update: SetDefaultSortOrderUpdate, changes: Changes
) -> TableMetadata:
    order_id = resolve_last_added(update.sort_order_id, changes.last_added_order_id, "sort order")
    if order_id == metadata.default_sort_order_id:
        return metadata
    if metadata.sort_order_by_id(order_id) is None:
        raise ValueError(f"Cannot set default sort order to unknown sort order: {order_id}")
    return metadata.model_copy(update={"default_sort_order_id": order_id})


def _remove_partition_specs(metadata: TableMetadata, update: RemovePartitionSpecsUpdate, _: Changes) -> TableMetadata:
    if metadata.default_spec_id in update.spec_ids:
        raise ValueError(f"Cannot remove the default partition spec: {metadata.default_spec_id}")
    present = sorted(set(update.spec_ids).intersection(metadata.specs()))
    if not present:
        return metadata
    return apply_with_pyiceberg(metadata, RemovePartitionSpecsUpdate(spec_ids=present))


def _remove_schemas(metadata: TableMetadata, update: RemoveSchemasUpdate, _: Changes) -> TableMetadata:
    if metadata.current_schema_id in update.schema_ids:
        raise ValueError(f"Cannot remove the current schema: {metadata.current_schema_id}")
    present = sorted(set(update.schema_ids).intersection(s.schema_id for s in metadata.schemas))
    if not present:
        return metadata
    return apply_with_pyiceberg(metadata, RemoveSchemasUpdate(schema_ids=present))


SCHEMA_UPDATES: dict[type, Handler] = {
    AddSchemaUpdate: _add_schema,
    SetCurrentSchemaUpdate: _set_current_schema,
    AddPartitionSpecUpdate: _add_spec,
    SetDefaultSpecUpdate: _set_default_spec,
    AddSortOrderUpdate: _add_sort_order,
    SetDefaultSortOrderUpdate: _set_default_sort_order,
    RemovePartitionSpecsUpdate: _remove_partition_specs,
    RemoveSchemasUpdate: _remove_schemas,
}
