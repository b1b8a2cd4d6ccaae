"""Data and delete files in the spec's ``ContentFile`` JSON shape (pure, no I/O).

Encodings, as Iceberg's Java ``ContentFileParser`` writes them for the REST scan-planning
answers: ``partition`` is the list of partition values in the order of the file's partition
spec, each in the spec's single-value encoding for the partition field's result type (a
``day`` partition is a date string); column statistics are ``{"keys": [...], "values": [...]}``
maps; bounds are the binary single-value form of Iceberg's bound serialisation (uppercase hex),
which is what a manifest stores and what Java's client decodes. Column statistics are only sent
for the ``stats-fields`` the client asked for. ``withheld``: the columns a caller's read
restrictions hide or transform (app/rules/scan/restricted.py), whose partition values are written
``null`` (the caller's ``stats_ids`` already leave their statistics out).
"""

from __future__ import annotations

from typing import Any

from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema

from app.rules.scan.filter import value_json

CONTENT = {
    DataFileContent.DATA: "data",
    DataFileContent.POSITION_DELETES: "position-deletes",
    DataFileContent.EQUALITY_DELETES: "equality-deletes",
}
COUNT_MAPS = (
    ("column-sizes", "column_sizes"),
    ("value-counts", "value_counts"),
    ("null-value-counts", "null_value_counts"),
    ("nan-value-counts", "nan_value_counts"),
)
BOUND_MAPS = (("lower-bounds", "lower_bounds"), ("upper-bounds", "upper_bounds"))


def partition_values(
    data_file: DataFile, spec: PartitionSpec | None, schema: Schema, withheld: frozenset[int] = frozenset()
) -> list[Any]:
    partition = data_file.partition
    if spec is None or not spec.fields:
        return []
    try:
        result_types = [field.field_type for field in spec.partition_type(schema).fields]
    except (ValueError, KeyError):  # a source column gone from this schema: values as they are
        result_types = [None] * len(spec.fields)
    return [
        None if spec.fields[i].source_id in withheld else value_json(partition[i], result_types[i])
        for i in range(min(len(partition), len(result_types)))
    ]


def content_file_json(
    data_file: DataFile,
    spec: PartitionSpec | None,
    schema: Schema,
    stats_ids: frozenset[int] = frozenset(),
    withheld: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "content": CONTENT[data_file.content],
        "file-path": data_file.file_path,
        "file-format": str(data_file.file_format.value).lower(),
        "spec-id": data_file.spec_id or 0,
        "partition": partition_values(data_file, spec, schema, withheld),
        "file-size-in-bytes": data_file.file_size_in_bytes,
        "record-count": data_file.record_count,
    }
    if data_file.key_metadata:
        body["key-metadata"] = bytes(data_file.key_metadata).hex().upper()
    if data_file.split_offsets:
        body["split-offsets"] = list(data_file.split_offsets)
    if data_file.sort_order_id is not None and data_file.content != DataFileContent.POSITION_DELETES:
        body["sort-order-id"] = data_file.sort_order_id
    if data_file.content == DataFileContent.DATA:
        if getattr(data_file, "first_row_id", None) is not None:
            body["first-row-id"] = data_file.first_row_id
        _add_stats(body, data_file, stats_ids)
    elif data_file.content == DataFileContent.EQUALITY_DELETES:
        body["equality-ids"] = list(data_file.equality_ids or [])
    else:
        for key, attribute in (
            ("referenced-data-file", "referenced_data_file"),
            ("content-offset", "content_offset"),
            ("content-size-in-bytes", "content_size_in_bytes"),
        ):
            if getattr(data_file, attribute, None) is not None:
                body[key] = getattr(data_file, attribute)
    return body


def _add_stats(body: dict[str, Any], data_file: DataFile, stats_ids: frozenset[int]) -> None:
    if not stats_ids:
        return
    for key, attribute in COUNT_MAPS:
        values = getattr(data_file, attribute, None) or {}
        kept = sorted(field_id for field_id in values if field_id in stats_ids)
        if kept:
            body[key] = {"keys": kept, "values": [values[field_id] for field_id in kept]}
    for key, attribute in BOUND_MAPS:
        values = getattr(data_file, attribute, None) or {}
        kept = sorted(field_id for field_id in values if field_id in stats_ids)
        if kept:
            body[key] = {"keys": kept, "values": [bytes(values[field_id]).hex().upper() for field_id in kept]}
