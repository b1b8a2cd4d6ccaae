"""The console's preview for a caller with read restrictions (issue 51): the rows it may see.

storage/previews.py reads the rows and knows no rule; it is handed a ``RestrictedRows`` (its
``RowRestriction``) and calls it twice: for the row filter its scan reads with, then on the Arrow
rows read. The rules are the restrictions' own (``read_plan``, ``filter_rows``, ``apply_action``),
bound to the schema the rows were read as, so the console shows a restricted principal what
Spark or PyIceberg, as trusted engines, would show it - hidden columns left out rather than
nulled, since the console is no engine that needs the table's shape.

Fail closed throughout: a filter that does not bind keeps no row; a rule on a field inside a list
or map (whose Arrow values cannot be cut field by field here) nulls the whole top-level column.
The ``sha-256-query-local`` salt is one per preview (the caller draws it), so a value hashes the
same within one page and differently on the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StructType

from app.rules.restrictions.actions import apply_action, filter_rows
from app.rules.restrictions.policies import ReadPlan, Restrictions, read_plan
from app.rules.scan.restricted import restricted_fields


@dataclass(frozen=True)
class RestrictedRows:
    restrictions: Restrictions
    salt: bytes  # for sha-256-query-local: secrets.token_bytes(16), one per preview

    def row_filter(self, schema: Schema) -> BooleanExpression:
        return read_plan(self.restrictions, schema).row_filter

    def apply(self, rows: pa.Table, schema: Schema) -> pa.Table:
        """Rows where the filter is true (again: the scan filtered with it already, this holds
        whatever the reader did), then each column left out, transformed or kept."""
        plan = read_plan(self.restrictions, schema)
        if not isinstance(plan.row_filter, AlwaysTrue):
            rows = filter_rows(rows, plan.row_filter, schema)
        names: list[str] = []
        columns: list[pa.Array | pa.ChunkedArray] = []
        for field in schema.fields:
            if field.field_id in plan.hidden:
                continue
            names.append(field.name)
            columns.append(self._column(rows.column(field.name), field, plan, schema))
        return pa.table(columns, names=names) if names else pa.table({})

    def _column(self, array: pa.ChunkedArray, field: NestedField, plan: ReadPlan, schema: Schema) -> pa.Array:
        if field.field_id in plan.actions:
            return apply_action(plan.actions[field.field_id], array, field.field_type, salt=self.salt)
        inner = restricted_fields(schema, [field.field_id]) - {field.field_id}
        if not inner & (plan.hidden | plan.actions.keys()):
            return array
        if isinstance(field.field_type, StructType):
            return self._struct(array.combine_chunks(), field.field_type, plan, schema)
        return pa.nulls(len(array), type=array.type)  # a rule inside a list or map: fail closed

    def _struct(self, array: pa.StructArray, struct: StructType, plan: ReadPlan, schema: Schema) -> pa.Array:
        """A struct with its restricted fields left out or transformed, its nulls kept."""
        children: list[pa.Array] = []
        fields: list[pa.Field] = []
        for index, child in enumerate(struct.fields):
            if child.field_id in plan.hidden:
                continue
            values = pa.chunked_array([array.field(index)])
            children.append(_whole(self._column(values, child, plan, schema)))
            fields.append(pa.field(child.name, children[-1].type))
        if not children:
            return pa.nulls(len(array), type=pa.struct([]))
        return pa.StructArray.from_arrays(children, fields=fields, mask=pc.is_null(array))


def _whole(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
