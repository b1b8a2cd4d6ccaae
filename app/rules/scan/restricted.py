"""A scan planned for a caller with read restrictions (issue 51). Pure: no I/O.

Server-side planning answers file scan tasks: which files, their partition values and column
statistics, and the filter left for each. For a restricted caller every part of that is cut to
what the caller may read, whether or not it is a trusted engine (a plan without credentials is
answered to anyone with READ, so the plan itself must leak nothing):

- **rows**: the restrictions' row filter is and-ed into the scan's filter, so a file that cannot
  hold an allowed row is pruned (partition and metrics evaluation) and every task's
  ``residual-filter`` carries what is left of it;
- **restricted columns** (hidden or transformed, and every field nested in one) decide nothing
  by their values: the caller's own filter is weakened before it prunes - each predicate on such
  a column becomes ``true``, nots pushed down first, so the weakened filter is implied by the
  original and prunes no file the original would keep - and the caller's whole filter is and-ed
  into every residual instead, so the engine still applies it. Pruning by it would answer "which
  files hold a salary above X" for a hidden salary;
- their **column statistics** (bounds, value, null and NaN counts, sizes) are never answered,
  whatever ``stats-fields`` asks, and their **partition values** are answered ``null`` (an
  identity partition on a hidden column would otherwise list its values).

The ``select`` needs no cutting: a plan's answer carries no projection (file scan tasks name
files; the engine projects), so whatever a select names, nothing of a hidden column is answered.
A select naming hidden columns is accepted as asked, not refused: an engine that selects every
column (``SELECT *``) must be able to plan; one naming hidden columns only is planned like any
other (the same files), never widened to "every column" nor given their statistics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundPredicate,
    Or,
    UnboundPredicate,
)
from pyiceberg.expressions.visitors import rewrite_not
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, ListType, MapType, StructType

from app.rules.restrictions.policies import Restrictions, read_plan


@dataclass(frozen=True)
class ScanRestriction:
    """The caller's restrictions bound to the scan's schema, as planning uses them."""

    row_filter: BooleanExpression  # AlwaysFalse when it does not bind: no file is planned
    withheld: frozenset[int]  # field ids of hidden and transformed columns, nested fields included
    digest: str  # which restrictions the plan was made under (its pages are the caller's only)


def scan_restriction(restrictions: Restrictions, schema: Schema) -> ScanRestriction:
    plan = read_plan(restrictions, schema)
    return ScanRestriction(
        plan.row_filter, restricted_fields(schema, plan.hidden | plan.actions.keys()), restrictions.digest
    )


def restricted_fields(schema: Schema, field_ids: Iterable[int]) -> frozenset[int]:
    """``field_ids`` and every field nested in them: hiding or masking a struct covers its fields."""
    found: set[int] = set()
    for field_id in field_ids:
        found.add(field_id)
        try:
            field_type = schema.find_field(field_id).field_type
        except ValueError:
            continue
        found.update(_nested_ids(field_type))
    return frozenset(found)


def _nested_ids(field_type: IcebergType) -> Iterable[int]:
    if isinstance(field_type, StructType):
        children = list(field_type.fields)
    elif isinstance(field_type, ListType):
        children = [field_type.element_field]
    elif isinstance(field_type, MapType):
        children = [field_type.key_field, field_type.value_field]
    else:
        return
    for child in children:
        yield child.field_id
        yield from _nested_ids(child.field_type)


def without_columns(
    expression: BooleanExpression, field_ids: frozenset[int], schema: Schema, case_sensitive: bool = True
) -> tuple[BooleanExpression, bool]:
    """``expression`` with every predicate on ``field_ids`` replaced by ``true`` (after pushing nots
    down to the predicates, so each replacement only widens), and whether any was replaced.

    The result is implied by ``expression``: pruning with it keeps every file ``expression`` would
    keep, and its outcome depends on no value of those columns.
    """
    if not field_ids:
        return expression, False
    replaced = [False]

    def walk(node: BooleanExpression) -> BooleanExpression:
        if isinstance(node, And):
            return And(walk(node.left), walk(node.right))
        if isinstance(node, Or):
            return Or(walk(node.left), walk(node.right))
        if isinstance(node, (AlwaysTrue, AlwaysFalse)):
            return node
        if _field_id(node, schema, case_sensitive) in field_ids:
            replaced[0] = True
            return AlwaysTrue()
        return node

    weakened = walk(rewrite_not(expression))
    return (weakened, True) if replaced[0] else (expression, False)


def _field_id(predicate: BooleanExpression, schema: Schema, case_sensitive: bool) -> int | None:
    if isinstance(predicate, BoundPredicate):
        return predicate.term.ref().field.field_id
    if isinstance(predicate, UnboundPredicate):
        try:
            return schema.find_field(predicate.term.name, case_sensitive).field_id
        except ValueError:
            return None
    return None
