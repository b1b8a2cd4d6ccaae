"""The rules of read restrictions (app/rules/restrictions/policies.py): what applies to a caller,
how restrictions combine, the caller put in, fail-closed binding, and the spec's rendering."""

from __future__ import annotations

import pytest
from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from app.ground.errors import BadRequest
from app.rules.privileges import EffectiveGrants, Kind, Securable, chain
from app.rules.restrictions.policies import (
    ColumnRule,
    ReadPolicy,
    check_against,
    check_policy,
    for_caller,
    read_plan,
    restrictions_on,
    spec_restrictions,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "salary", DoubleType()),
    NestedField(4, "email", StringType()),
)
TABLE = Securable.of_entry(Kind.TABLE, "wh", ("hr",), "people")
EU = {"type": "eq", "term": "region", "value": "eu"}


def _policy(key, row_filter=None, *columns: tuple[str, str]) -> ReadPolicy:
    return ReadPolicy(key, row_filter, tuple(ColumnRule(name, action) for name, action in columns))


def test_only_restrictions_on_the_table_or_above_it_apply():
    policies = [
        _policy(("wh", ("hr",), "people"), EU),
        _policy(("wh", ("hr",), None), None, ("salary", "hide")),
        _policy(("wh", ("finance",), None), {"type": "eq", "term": "id", "value": 1}),  # elsewhere
        _policy(("other", (), None), None, ("email", "hide")),  # another warehouse
    ]
    found = restrictions_on(policies, chain(TABLE.key))
    assert found is not None
    assert found.row_filters == (EU,)
    assert found.columns == (ColumnRule("salary", "hide"),)
    assert restrictions_on(policies, chain(Securable.of_entry(Kind.TABLE, "wh", ("ops",), "t").key)) is None


def test_row_filters_are_and_ed_and_the_stricter_column_rule_wins():
    key = TABLE.key
    policies = [
        _policy(key, EU, ("email", "show-last-4")),
        _policy(
            key, {"type": "gt", "term": "id", "value": 10}, ("email", "mask-to-default"), ("salary", "sha-256-global")
        ),
        _policy(key, True),  # an always-true filter restricts nothing
    ]
    found = restrictions_on(policies, chain(key))
    assert found is not None and len(found.row_filters) == 2
    assert dict((rule.name, rule.action) for rule in found.columns) == {
        "email": "mask-to-default",
        "salary": "sha-256-global",
    }
    plan = read_plan(found, SCHEMA)
    assert isinstance(plan.row_filter, And)


def test_the_caller_is_put_into_a_filter():
    node = {
        "type": "and",
        "left": {"type": "eq", "term": "email", "value": "${principal}"},
        "right": {"type": "in", "term": "region", "values": ["${roles}", "global"]},
    }
    policy = for_caller(TABLE.key, node, (), "alice", ["eu", "apac", "eu"])
    assert policy.row_filter == {
        "type": "and",
        "left": {"type": "eq", "term": "email", "value": "alice"},
        "right": {"type": "in", "term": "region", "values": ["apac", "eu", "global"]},
    }


def test_a_filter_that_no_longer_binds_keeps_no_row_and_an_inapplicable_action_nulls():
    found = restrictions_on(
        [_policy(TABLE.key, {"type": "eq", "term": "gone", "value": "x"}, ("salary", "show-first-4"), ("old", "hide"))],
        chain(TABLE.key),
    )
    assert found is not None
    plan = read_plan(found, SCHEMA)
    assert isinstance(plan.row_filter, AlwaysFalse)  # fail closed
    assert plan.actions == {3: "replace-with-null"}  # show-first-4 does not take a double
    assert plan.hidden == frozenset()  # a rule on a column the schema lacks hides nothing else
    assert spec_restrictions(found, SCHEMA) == {
        "required-row-filter": False,
        "required-column-projections": [{"action": "replace-with-null", "field-id": 3}],
    }


def test_the_spec_form_names_field_ids_and_tells_an_engine_to_null_hidden_columns():
    found = restrictions_on(
        [_policy(TABLE.key, EU, ("salary", "hide"), ("email", "sha-256-query-local"))], chain(TABLE.key)
    )
    assert found is not None
    assert spec_restrictions(found, SCHEMA) == {
        "required-row-filter": {"type": "eq", "term": "region", "value": "eu"},
        "required-column-projections": [
            {"action": "replace-with-null", "field-id": 3},
            {"action": "sha-256-query-local", "field-id": 4},
        ],
    }
    plan = read_plan(found, SCHEMA)
    assert plan.hidden == frozenset({3}) and not plan.visible(3) and plan.visible(4)


def test_digest_tells_restrictions_apart():
    one = restrictions_on([_policy(TABLE.key, EU)], chain(TABLE.key))
    two = restrictions_on([_policy(TABLE.key, {"type": "eq", "term": "region", "value": "us"})], chain(TABLE.key))
    assert one is not None and two is not None
    assert one.digest != two.digest
    assert one.digest == restrictions_on([_policy(TABLE.key, EU)], chain(TABLE.key)).digest


def test_administrators_are_never_restricted():
    policies = (_policy(TABLE.key, EU),)
    assert EffectiveGrants.build([], admin=True, restrictions=policies).restrictions_on(TABLE) is None
    assert EffectiveGrants.build([], restrictions=policies).restrictions_on(TABLE) is not None
    assert EffectiveGrants.build([]).restrictions_on(TABLE) is None


@pytest.mark.parametrize(
    ("row_filter", "columns", "words"),
    [
        (None, [], "needs a row-filter, columns, or both"),
        ({"type": "near"}, [], "not an Iceberg expression"),
        ({"type": "eq", "value": 1}, [], "names no column"),
        ("region = 'eu'", [], "not an Iceberg expression"),
        (None, [("salary", "blur")], "Unknown column action 'blur'"),
        (None, [("salary", "hide"), ("salary", "hide")], "more than one rule"),
    ],
)
def test_bad_policies_are_refused(row_filter, columns, words):
    with pytest.raises(BadRequest, match=words):
        check_policy(row_filter, columns)


def test_a_deeply_nested_filter_is_refused():
    node: object = EU
    for _ in range(60):
        node = {"type": "not", "child": node}
    with pytest.raises(BadRequest, match="nested deeper"):
        check_policy(node, [])


def test_a_table_restriction_is_checked_against_its_schema():
    check_against(SCHEMA, EU, (ColumnRule("salary", "hide"), ColumnRule("email", "show-last-4")))
    check_against(SCHEMA, {"type": "eq", "term": "email", "value": "${principal}"}, ())
    with pytest.raises(BadRequest, match="Invalid row-filter for this table"):
        check_against(SCHEMA, {"type": "eq", "term": "nope", "value": "x"}, ())
    with pytest.raises(BadRequest, match="Cannot find column 'nope'"):
        check_against(SCHEMA, None, (ColumnRule("nope", "hide"),))
    with pytest.raises(BadRequest, match="does not apply to id"):
        check_against(SCHEMA, None, (ColumnRule("id", "mask-alphanum"),))
    assert isinstance(
        read_plan(restrictions_on([_policy(TABLE.key, None, ("id", "hide"))], chain(TABLE.key)), SCHEMA).row_filter,
        AlwaysTrue,
    )


def test_restricted_within_looks_at_above_and_below_the_node_only() -> None:
    """What a recursive drop of a namespace would take along (app/management/rights.py)."""
    on_table = EffectiveGrants.build([], restrictions=[_policy(("wh", ("a", "b"), "t"), EU)])
    on_namespace = EffectiveGrants.build([], restrictions=[_policy(("wh", ("a",), None), None, ("c", "hide"))])
    assert on_table.restricted_within(Securable.of_namespace("wh", ("a",)))  # the table is below
    assert on_table.restricted_within(Securable.of_namespace("wh", ("a", "b")))
    assert not on_table.restricted_within(Securable.of_namespace("wh", ("a", "c")))  # a sibling
    assert not on_table.restricted_within(Securable.of_namespace("other", ("a",)))
    assert on_namespace.restricted_within(Securable.of_namespace("wh", ("a", "c")))  # restricted above it
    assert not on_namespace.restricted_within(Securable.of_namespace("wh", ("z",)))
    admin = EffectiveGrants.build([], admin=True, restrictions=on_table.restrictions)
    assert not admin.restricted_within(Securable.of_namespace("wh", ("a",)))
