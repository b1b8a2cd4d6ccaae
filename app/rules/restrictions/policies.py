"""Read restrictions (issue 51): which rows and columns a caller may read of a table. Pure rules.

A restriction is attached like a grant (to the warehouse, a namespace, a table or a view) for a
role or one principal; the authorizer loads a caller's restrictions with its grants (one query,
storage/grants.py) and caches them under ``auth_state.version``, so a table's restrictions for the
caller cost no round trip (``restrictions_on``). Every restriction on the table or above it, from
every role the caller holds, applies: the row filters are and-ed, and of two rules on one column
the stricter wins (``STRICTNESS``) - holding one more role never reads more.

What applies is rendered two ways: the REST spec's ``read-restrictions`` for a trusted engine
(``spec_restrictions``: columns by field id, the filter bound to the table's schema), and a
``ReadPlan`` for Growler's own readers (console preview, scan planning). Fail closed: a filter
that does not bind to the table's schema (a column it names is gone) keeps no row, and a column
action the column's type does not take becomes ``replace-with-null``, which every type takes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, BooleanExpression
from pyiceberg.schema import Schema

from app.ground.errors import BadRequest
from app.rules.restrictions.applicability import applicable
from app.rules.scan.filter import FilterError, filter_json, parse_filter

HIDE = "hide"  # Growler's own readers leave the column out; an engine is told replace-with-null
NULL = "replace-with-null"
# Strictest first: of two rules on one column, the one earlier here applies.
STRICTNESS = (
    HIDE,
    NULL,
    "mask-to-default",
    "mask-alphanum",
    "sha-256-query-local",
    "show-first-4",
    "show-last-4",
    "sha-256-global",
    "truncate-to-year",
    "truncate-to-month",
)
PRINCIPAL, ROLES = "${principal}", "${roles}"
MAX_FILTER_DEPTH = 50
_KINDS = frozenset(
    {"true", "false", "and", "or", "not", "in", "not-in", "lt", "lt-eq", "gt", "gt-eq", "eq", "not-eq"}
    | {"starts-with", "not-starts-with", "is-null", "not-null", "is-nan", "not-nan"}
)

Key = tuple[str | None, tuple[str, ...], str | None]  # app.rules.privileges.Key


@dataclass(frozen=True)
class ColumnRule:
    name: str
    action: str


@dataclass(frozen=True)
class ReadPolicy:
    """One stored restriction as a caller's cached grants carry it: where it is attached (a node of
    the grants' tree) and what it keeps, the caller already put in (``for_caller``)."""

    key: Key
    row_filter: Any | None
    columns: tuple[ColumnRule, ...] = ()


@dataclass(frozen=True)
class Restrictions:
    """What applies to one caller on one table: every row filter (and-ed) and a rule per column."""

    row_filters: tuple[Any, ...]
    columns: tuple[ColumnRule, ...]

    @property
    def digest(self) -> str:
        """Part of loadTable's ETag: an answer carrying other restrictions is another answer."""
        text = json.dumps([self.row_filters, [(c.name, c.action) for c in self.columns]], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ReadPlan:
    """The restrictions bound to one schema, for Growler's own readers: rows kept where
    ``row_filter`` is true (original values), then each column's action; hidden ones left out."""

    row_filter: BooleanExpression
    actions: dict[int, str]  # field id -> spec action (never "hide")
    hidden: frozenset[int]

    def visible(self, field_id: int) -> bool:
        return field_id not in self.hidden


def check_policy(row_filter: Any, columns: Iterable[tuple[str, str]]) -> tuple[Any | None, tuple[ColumnRule, ...]]:
    """The management API's checks of a restriction, before anything is written (400 otherwise)."""
    if row_filter is not None:
        _check_shape(row_filter, 0)
    rules: dict[str, ColumnRule] = {}
    for name, action in columns:
        if action not in STRICTNESS:
            raise BadRequest(f"Unknown column action {action!r}: one of {', '.join(STRICTNESS)}")
        if name in rules:
            raise BadRequest(f"Column {name!r} has more than one rule")
        rules[name] = ColumnRule(name, action)
    if row_filter is None and not rules:
        raise BadRequest("A read restriction needs a row-filter, columns, or both")
    return row_filter, tuple(rules.values())


def check_against(schema: Schema, row_filter: Any | None, columns: Iterable[ColumnRule]) -> None:
    """A restriction attached to one table or view: its filter binds and its columns exist now."""
    if row_filter is not None:
        try:
            parse_filter(_example_caller(row_filter), schema)
        except FilterError as exc:
            raise BadRequest(f"Invalid row-filter for this table: {exc.message}") from None
    for rule in columns:
        field = _field(schema, rule.name)
        if field is None:
            raise BadRequest(f"Cannot find column {rule.name!r} in the table's current schema")
        if rule.action != HIDE and not applicable(rule.action, field.field_type):
            raise BadRequest(f"Column action {rule.action} does not apply to {rule.name} of type {field.field_type}")


def for_caller(
    key: Key, row_filter: Any | None, columns: tuple[ColumnRule, ...], principal: str, roles: Iterable[str]
) -> ReadPolicy:
    """A stored restriction with ``${principal}`` and ``${roles}`` replaced by the caller's."""
    held = sorted(set(roles))
    return ReadPolicy(key, _substitute(row_filter, principal, held) if row_filter is not None else None, columns)


def restrictions_on(policies: Iterable[ReadPolicy], chain: list[Key]) -> Restrictions | None:
    """What applies to a table whose node and ancestors are ``chain`` (None: no restriction)."""
    nodes = set(chain)
    filters: list[Any] = []
    columns: dict[str, str] = {}
    for policy in policies:
        if policy.key not in nodes:
            continue
        if policy.row_filter is not None and policy.row_filter is not True:
            filters.append(policy.row_filter)
        for rule in policy.columns:
            held = columns.get(rule.name)
            if held is None or STRICTNESS.index(rule.action) < STRICTNESS.index(held):
                columns[rule.name] = rule.action
    if not filters and not columns:
        return None
    ordered = sorted(filters, key=lambda node: json.dumps(node, sort_keys=True))
    return Restrictions(tuple(ordered), tuple(ColumnRule(n, a) for n, a in sorted(columns.items())))


def read_plan(restrictions: Restrictions, schema: Schema) -> ReadPlan:
    """The restrictions bound to ``schema`` (fail closed: see the module's docstring)."""
    row_filter: BooleanExpression = AlwaysTrue()
    for node in restrictions.row_filters:
        try:
            row_filter = And(row_filter, parse_filter(node, schema))
        except (FilterError, BadRequest):
            row_filter = AlwaysFalse()
            break
    actions: dict[int, str] = {}
    hidden: set[int] = set()
    for rule in restrictions.columns:
        field = _field(schema, rule.name)
        if field is None:
            continue  # no such column in this schema: nothing of it to read
        if rule.action == HIDE:
            hidden.add(field.field_id)
        elif applicable(rule.action, field.field_type):
            actions[field.field_id] = rule.action
        else:
            actions[field.field_id] = NULL
    return ReadPlan(row_filter, actions, frozenset(hidden))


def spec_restrictions(restrictions: Restrictions, schema: Schema) -> dict[str, Any]:
    """The REST spec's ``read-restrictions`` for a trusted engine: the filter bound to the
    table's schema (``false`` when it does not bind), hidden columns as ``replace-with-null``."""
    plan = read_plan(restrictions, schema)
    answer: dict[str, Any] = {}
    if not isinstance(plan.row_filter, AlwaysTrue):
        answer["required-row-filter"] = filter_json(plan.row_filter, schema)
    projections = {**plan.actions, **dict.fromkeys(plan.hidden, NULL)}
    if projections:
        answer["required-column-projections"] = [
            {"action": action, "field-id": field_id} for field_id, action in sorted(projections.items())
        ]
    return answer


def untrusted_message(table: str, principal: str | None) -> str:
    """The 403 of a restricted caller that is not a trusted engine, saying what to do next."""
    who = f"principal {principal}" if principal else "the caller"
    return (
        f"Table {table} has read restrictions for {who}, which is not a trusted engine: no metadata or storage"
        " access is given for it. Read it through an engine whose principal an administrator marked as a"
        " trusted engine (management API: PUT /principals/{principal}/trusted-engine, or"
        " PUT /roles/{role}/trusted-engine for a role it holds), or through Growler's console"
    )


def _field(schema: Schema, name: str) -> Any:
    try:
        return schema.find_field(name)
    except ValueError:
        return None


def _check_shape(node: Any, depth: int) -> None:
    """The Expression JSON's structure (types, operands), without a schema to bind to."""
    if depth > MAX_FILTER_DEPTH:
        raise BadRequest(f"Invalid row-filter: nested deeper than {MAX_FILTER_DEPTH}")
    if isinstance(node, bool):
        return
    if not isinstance(node, dict) or node.get("type") not in _KINDS:
        raise BadRequest(f"Invalid row-filter: not an Iceberg expression: {json.dumps(node)[:200]}")
    kind = node["type"]
    if kind in ("and", "or"):
        _check_shape(node.get("left"), depth + 1)
        _check_shape(node.get("right"), depth + 1)
    elif kind == "not":
        _check_shape(node.get("child"), depth + 1)
    elif kind not in ("true", "false") and "term" not in node and "left" not in node:
        raise BadRequest(f"Invalid row-filter: {kind} names no column")


def _substitute(node: Any, principal: str, roles: list[str]) -> Any:
    if isinstance(node, str):
        return principal if node == PRINCIPAL else node
    if isinstance(node, list):
        expanded: list[Any] = []
        for item in node:
            if item == ROLES:
                expanded.extend(roles)
            else:
                expanded.append(_substitute(item, principal, roles))
        return expanded
    if isinstance(node, dict):
        return {key: _substitute(value, principal, roles) for key, value in node.items()}
    return node


def _example_caller(node: Any) -> Any:
    """The filter with a caller put in, to check it binds (a role list may be empty: one name)."""
    return _substitute(node, "principal", ["role"])
