"""Values the table rules compute stay within Java's int and long (request values are checked on parse)."""

from __future__ import annotations

import pytest
from table_metadata_builders import add_snapshot, append, apply, new_table, set_ref, snapshot

from app.ground.errors import BadRequest
from app.ground.limits import INT32_MAX, INT64_MAX
from app.rules import table as tm


def test_next_row_id_past_the_64_bit_range_is_refused():
    metadata = new_table(3)
    near_top = {"first-row-id": INT64_MAX - 5, "added-rows": 10}
    with pytest.raises(BadRequest, match="next-row-id .* outside the signed 64-bit range"):
        apply(metadata, add_snapshot(snapshot(1, sequence_number=1, **near_top)), set_ref("main", 1))
    at_top = append(metadata, 1, **{"first-row-id": INT64_MAX - 10, "added-rows": 10})
    assert at_top.next_row_id == INT64_MAX


def test_a_schema_id_one_past_the_32_bit_range_is_refused():
    metadata = new_table(2)
    top = metadata.model_copy(
        update={
            "schemas": [metadata.schemas[0].model_copy(update={"schema_id": INT32_MAX})],
            "current_schema_id": INT32_MAX,
        }
    )
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [
            *(f.model_dump(mode="json") for f in metadata.schema().fields),
            {"id": metadata.last_column_id + 1, "name": "extra", "type": "int", "required": False},
        ],
    }
    with pytest.raises(BadRequest, match="schema-id 2147483648 is outside the signed 32-bit range"):
        apply(top, {"action": "add-schema", "schema": schema}, {"action": "set-current-schema", "schema-id": -1})


def test_ranges_of_ordinary_metadata_pass():
    metadata = append(new_table(3), 1)
    assert tm.to_json(metadata)
