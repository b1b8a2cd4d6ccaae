"""The dispatcher's compiled body check agrees with connexion's jsonschema validation.

The compiled reader takes a body only when it is valid; whatever it refuses is read by
connexion's validation, which answers as always. So the compiled check must never accept what
jsonschema refuses. Both are run over accepted and refused RemoteSignRequest bodies,
and the check is only compiled for schemas whose keywords both read alike.
"""

from __future__ import annotations

import json

import pytest
from connexion.json_schema import Draft4RequestValidator, resolve_refs
from jsonschema import Draft4Validator

from app.edge.factory import load_spec
from app.edge.validation import compiled_check

SCHEMA = resolve_refs(load_spec())["components"]["schemas"]["RemoteSignRequest"]
VALID = {"region": "us-east-1", "uri": "http://s3/b/k", "method": "GET", "headers": {}}

BODIES = [
    VALID,
    {**VALID, "headers": {"Range": ["bytes=0-1"], "X": []}},
    {**VALID, "properties": {"a": "b"}, "body": "<Delete/>", "provider": "s3"},
    {**VALID, "unknown": 1},  # additional members: the schema allows them
    {**VALID, "method": "TRACE"},
    {key: value for key, value in VALID.items() if key != "region"},
    {**VALID, "headers": {"a": "not-a-list"}},
    {**VALID, "headers": {"a": [1]}},
    {**VALID, "headers": []},
    {**VALID, "properties": {"a": 1}},
    {**VALID, "region": None},
    {**VALID, "body": 5},
    {**VALID, "uri": ["x"]},
    [],
    "text",
    None,
]


@pytest.mark.parametrize("body", BODIES)
def test_the_compiled_check_accepts_exactly_what_jsonschema_accepts(body):
    check = compiled_check(SCHEMA)
    assert check is not None
    reference = Draft4RequestValidator(SCHEMA, format_checker=Draft4Validator.FORMAT_CHECKER)
    try:
        check(body)
        compiled = True
    except Exception:  # noqa: BLE001 - any refusal
        compiled = False
    assert compiled == reference.is_valid(body)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer"},  # numbers: where validators' integer and float rules differ
        {"type": "object", "properties": {"n": {"type": "number"}}},
        {"type": "string", "format": "date-time"},
        {"type": "object", "properties": {"a": {"type": "string", "nullable": True}}},
        {"type": "object", "properties": {"a": {"type": "boolean"}}},
        {"oneOf": [{"type": "string"}, {"type": "object"}]},
        {"type": "array", "items": {"type": "string", "minLength": 1}},
    ],
)
def test_other_schemas_are_left_to_jsonschema(schema):
    assert compiled_check(schema) is None


def test_connexions_own_validation_stays_jsonschemas():
    """connexion builds a validator per request and calls ``_parse_and_validate``: its refusal is
    jsonschema's 400 (message and all), also for a schema the dispatcher's reader would compile."""
    from connexion.exceptions import BadRequestProblem

    from app.edge.validation import validator_map

    validator = validator_map()["body"]["*/*json"](
        schema=SCHEMA, required=True, nullable=False, encoding="utf-8", strict_validation=True
    )
    with pytest.raises(BadRequestProblem, match="'TRACE' is not one of"):
        validator._parse_and_validate(json.dumps({**VALID, "method": "TRACE"}).encode())
    assert validator.accepted(json.dumps(VALID).encode()) == VALID
