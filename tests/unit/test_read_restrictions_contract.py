"""What Growler sends as loadTable's ``read-restrictions`` is the shape openapi/read-restrictions.yaml
declares (the REST spec's ReadRestrictions, apache/iceberg PR 13879), its row filter a ``Predicate``
of openapi/catalog.yaml - for every column action and for a fail-closed ``false`` filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft4Validator
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

from app.rules.privileges import chain
from app.rules.restrictions.policies import STRICTNESS, ColumnRule, ReadPolicy, restrictions_on, spec_restrictions

OPENAPI = Path(__file__).resolve().parents[2] / "openapi"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "salary", DoubleType()),
    NestedField(4, "born", DateType()),
)
KEY = ("wh", ("hr",), "people")


def _validator() -> Draft4Validator:
    """The extension's schemas with the catalog's beside them (its refs resolve there, as when merged)."""
    catalog = yaml.safe_load((OPENAPI / "catalog.yaml").read_text())
    extension = yaml.safe_load((OPENAPI / "read-restrictions.yaml").read_text())
    merged = {"components": {"schemas": {**catalog["components"]["schemas"], **extension["components"]["schemas"]}}}
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(merged, default_specification=DRAFT4))
    return Draft4Validator({"$ref": "urn:openapi#/components/schemas/ReadRestrictions"}, registry=registry)


def _column_for(action: str) -> str:
    if action in ("mask-alphanum", "show-first-4", "show-last-4"):
        return "region"
    if action in ("truncate-to-year", "truncate-to-month"):
        return "born"
    if action in ("sha-256-global", "sha-256-query-local"):
        return "id"
    return "salary"


@pytest.mark.parametrize("action", STRICTNESS)
def test_every_action_is_sent_in_the_declared_shape(action: str):
    row_filter: Any = {
        "type": "and",
        "left": {"type": "eq", "term": "region", "value": "eu"},
        "right": {"type": "in", "term": "id", "values": [1, 2]},
    }
    policy = ReadPolicy(KEY, row_filter, (ColumnRule(_column_for(action), action),))
    restrictions = restrictions_on([policy], chain(KEY))
    assert restrictions is not None
    sent = spec_restrictions(restrictions, SCHEMA)
    assert sent["required-column-projections"][0]["action"] != "hide"
    errors = [error.message for error in _validator().iter_errors(sent)]
    assert errors == []


def test_a_filter_that_does_not_bind_is_sent_as_false_and_valid():
    policy = ReadPolicy(KEY, {"type": "eq", "term": "gone", "value": 1})
    restrictions = restrictions_on([policy], chain(KEY))
    assert restrictions is not None
    sent = spec_restrictions(restrictions, SCHEMA)
    assert sent == {"required-row-filter": False}
    assert list(_validator().iter_errors(sent)) == []


def test_the_declared_shape_refuses_what_the_spec_does_not_allow():
    validator = _validator()
    assert list(validator.iter_errors({"required-column-projections": [{"action": "hide", "field-id": 3}]}))
    assert list(validator.iter_errors({"required-column-projections": [{"action": "mask-alphanum"}]}))
    assert list(validator.iter_errors({"required-row-filter": "region = 'eu'"}))
