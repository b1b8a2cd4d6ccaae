"""Structural drift check: openapi/catalog.yaml against the upstream Iceberg REST spec (the comparer is
``spec_compare.py``): no drift, the documented deviations in place, and the comparer itself reports
every kind of drift it is meant to catch."""

from __future__ import annotations

import copy

import pytest

from tests.conformance.spec_compare import (
    ALLOWED_DEVIATIONS,
    ERROR_ENVELOPE,
    EXPECTED_OPERATIONS,
    OURS_PATH,
    UPSTREAM_PATH,
    _label,
    compare_specs,
    load_spec,
    operations,
)

# --------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def ours() -> dict:
    return load_spec(OURS_PATH)


@pytest.fixture(scope="module")
def upstream() -> dict:
    if not UPSTREAM_PATH.exists():
        pytest.skip(f"upstream Iceberg REST spec not found at {UPSTREAM_PATH}; nothing to compare against")
    return load_spec(UPSTREAM_PATH)


def test_contract_is_openapi_30(ours):
    assert str(ours["openapi"]).startswith("3.0"), f"openapi is {ours['openapi']!r}; connexion 3 needs 3.0.x"


def test_contract_has_all_operations(ours):
    ops = operations(ours)
    assert len(ops) == EXPECTED_OPERATIONS, sorted(_label(k) for k in ops)
    ids = [op.get("operationId") for op in ops.values()]
    assert len(set(ids)) == len(ids), "operationIds must be unique"


def test_documented_deviations_are_in_place(ours, upstream):
    """Every allowance is still needed: without the allowances, each allowed location differs."""
    unallowed = compare_specs(ours, upstream, allowances={})
    for where, aspects in ALLOWED_DEVIATIONS.items():
        assert any(p.startswith(f"{where}: ") for p in unallowed), (
            f"{where} no longer deviates ({sorted(aspects)}); remove it from ALLOWED_DEVIATIONS"
        )
    for name in ("CreateNamespaceRequest", "UpdateNamespacePropertiesRequest"):
        assert ours["components"]["schemas"][name].get("additionalProperties") is False, name


ANY_OF_VALUES = [
    (
        "ReportMetricsRequest",
        "request",
        {
            "report-type": "scan-report",
            "table-name": "sch.t",
            "snapshot-id": 1,
            "filter": {"type": "eq", "term": "id", "value": 5},
            "schema-id": 0,
            "projected-field-ids": [1],
            "projected-field-names": ["id"],
            "metrics": {},
        },
    ),
    ("Literal", "request", 5),
    ("Literal", "request", 1.5),
    ("Literal", "request", "abc"),
    ("Literal", "request", {"type": "literal", "value": "2024-01-01", "data-type": "date"}),
    ("Type", "request", "variant"),
    ("Type", "request", "long"),
    ("PlanTableScanResult", "response", {"status": "submitted", "plan-id": "p1"}),
    ("PlanTableScanResult", "response", {"status": "cancelled"}),
]


@pytest.mark.parametrize("name, direction, value", ANY_OF_VALUES, ids=lambda v: repr(v)[:30])
def test_overlapping_members_accept_valid_values(ours, name, direction, value):
    """The oneOf -> anyOf deviations, through the validators connexion uses on requests and responses."""
    from connexion.json_schema import Draft4RequestValidator, Draft4ResponseValidator, resolve_refs
    from jsonschema import Draft4Validator

    schema = resolve_refs(ours)["components"]["schemas"][name]
    validator_class = Draft4RequestValidator if direction == "request" else Draft4ResponseValidator
    errors = list(validator_class(schema, format_checker=Draft4Validator.FORMAT_CHECKER).iter_errors(value))
    assert not errors, f"{name} rejects {value!r}: {errors[0].message}"


def test_no_drift_from_upstream(ours, upstream):
    problems = compare_specs(ours, upstream)
    assert not problems, (
        f"openapi/catalog.yaml drifted from {UPSTREAM_PATH.name} ({len(problems)} differences):\n  "
        + "\n  ".join(problems)
    )


def test_comparison_of_contract_with_itself_is_clean(ours):
    assert compare_specs(ours, copy.deepcopy(ours)) == []


def _schema(doc: dict, name: str) -> dict:
    return doc["components"]["schemas"][name]


def _rename_property(doc):
    props = _schema(doc, "CreateTableRequest")["properties"]
    props["stage_create"] = props.pop("stage-create")


def _drop_operation(doc):
    del doc["paths"]["/v1/{prefix}/tables/rename"]["post"]


def _change_operation_id(doc):
    doc["paths"]["/v1/config"]["get"]["operationId"] = "getConfiguration"


def _drop_required(doc):
    _schema(doc, "TableIdentifier")["required"].remove("name")


def _shrink_enum(doc):
    _schema(doc, "SnapshotReference")["properties"]["type"]["enum"].remove("tag")


def _change_const(doc):
    _schema(doc, "AssertCreate")["properties"]["type"]["enum"] = ["assert-created"]


def _change_discriminator(doc):
    _schema(doc, "TableRequirement")["discriminator"]["propertyName"] = "kind"


def _flip_parameter_required(doc):
    op = doc["paths"]["/v1/{prefix}/namespaces/{namespace}/tables/{table}"]["delete"]
    next(p for p in op["parameters"] if p.get("name") == "purgeRequested")["required"] = True


def _drop_response_code(doc):
    del doc["paths"]["/v1/{prefix}/namespaces/{namespace}/tables/{table}"]["get"]["responses"]["304"]


def _swap_request_body(doc):
    body = doc["paths"]["/v1/{prefix}/namespaces"]["post"]["requestBody"]
    body["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/RenameTableRequest"}


def _drop_schema(doc):
    del doc["components"]["schemas"]["FieldName"]


def _add_property_in_allof_member(doc):
    _schema(doc, "CompletedPlanningResult")["allOf"][1]["properties"]["extra"] = {"type": "string"}


def _change_property_ref(doc):
    _schema(doc, "LoadTableResult")["properties"]["metadata"] = {"$ref": "#/components/schemas/ViewMetadata"}


MUTATIONS = [
    (_rename_property, ["schema CreateTableRequest: properties differ", "stage-create", "stage_create"]),
    (_drop_operation, ["operation POST /v1/{prefix}/tables/rename: in upstream, missing in ours"]),
    (_change_operation_id, ["GET /v1/config: operationId 'getConfiguration' != upstream 'getConfig'"]),
    (_drop_required, ["schema TableIdentifier: required differ: missing in ours ['name']"]),
    (_shrink_enum, ["schema SnapshotReference.type: enum differ"]),
    (_change_const, ["schema AssertCreate.type: enum differ"]),
    (_change_discriminator, ["schema TableRequirement: discriminator.propertyName: ours 'kind' != upstream 'type'"]),
    (
        _flip_parameter_required,
        [
            "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table} parameter purgeRequested (query): required",
        ],
    ),
    (_drop_response_code, ["GET /v1/{prefix}/namespaces/{namespace}/tables/{table} response 304: in upstream"]),
    (_swap_request_body, ["POST /v1/{prefix}/namespaces request body [application/json] schema: $ref"]),
    (_drop_schema, ["schema FieldName: in upstream, missing in ours"]),
    (_add_property_in_allof_member, ["schema CompletedPlanningResult/allOf[1]: properties differ", "extra"]),
    (_change_property_ref, ["schema LoadTableResult.metadata: $ref"]),
]


@pytest.mark.parametrize("mutate, expected", MUTATIONS, ids=[m.__name__.lstrip("_") for m, _ in MUTATIONS])
def test_comparison_reports_drift(ours, mutate, expected):
    mutated = copy.deepcopy(ours)
    mutate(mutated)
    problems = compare_specs(mutated, ours)
    report = "\n".join(problems)
    assert problems, f"{mutate.__name__} was not reported"
    for fragment in expected:
        assert fragment in report, f"expected {fragment!r} in drift report:\n{report}"


def _predicate_as_any_of(doc):
    s = _schema(doc, "Predicate")
    s["anyOf"] = s.pop("oneOf")


def _allowed_any_of_as_all_of(doc):
    s = _schema(doc, "PrimitiveTypeValue")
    s["allOf"] = s.pop("anyOf")


def _allowed_any_of_loses_member(doc):
    _schema(doc, "Type")["anyOf"].pop()


def _allowed_any_of_member_changed(doc):
    _schema(doc, "PrimitiveTypeValue")["anyOf"][1] = {"type": "string"}


def _envelope_at_unlisted_site(doc):
    _schema(doc, "IcebergErrorResponse")["properties"]["error"] = {"$ref": ERROR_ENVELOPE}


def _listed_error_site_points_elsewhere(doc):
    op = doc["paths"]["/v1/{prefix}/namespaces/{namespace}/views/{view}"]["get"]
    op["responses"]["404"]["content"]["application/json"]["schema"] = {"$ref": "#/components/schemas/CatalogConfig"}


DEVIATION_LIMITS = [
    (_predicate_as_any_of, ["schema Predicate: anyOf members", "schema Predicate: oneOf members"]),
    (_allowed_any_of_as_all_of, ["schema PrimitiveTypeValue: allOf members"]),
    (_allowed_any_of_loses_member, ["schema Type: oneOf members: ours 4 != upstream 5"]),
    (
        _allowed_any_of_member_changed,
        ["schema PrimitiveTypeValue/oneOf[1]: $ref: upstream has '#/components/schemas/IntegerTypeValue'"],
    ),
    (_envelope_at_unlisted_site, ["schema IcebergErrorResponse.error: $ref"]),
    (
        _listed_error_site_points_elsewhere,
        ["GET /v1/{prefix}/namespaces/{namespace}/views/{view} response 404 [application/json] schema: $ref"],
    ),
]


@pytest.mark.parametrize(
    "mutate, expected", DEVIATION_LIMITS, ids=[m.__name__.lstrip("_") for m, _ in DEVIATION_LIMITS]
)
def test_allowed_deviations_tolerate_only_their_own_shape(ours, upstream, mutate, expected):
    mutated = copy.deepcopy(ours)
    mutate(mutated)
    report = "\n".join(compare_specs(mutated, upstream))
    for fragment in expected:
        assert fragment in report, f"expected {fragment!r} in drift report:\n{report}"


def test_comparison_accepts_31_spellings_of_the_same_structure(ours):
    """Upstream-style 3.1 forms must compare equal to the 3.0 forms we use."""
    upstream_like = copy.deepcopy(ours)
    schemas = upstream_like["components"]["schemas"]
    schemas["AssertCreate"]["properties"]["type"] = {"type": "string", "const": "assert-create"}
    schemas["TrueExpression"]["properties"]["type"] = {"$ref": "#/components/schemas/ExpressionType", "const": "true"}
    schemas["CommitTableRequest"]["properties"]["identifier"] = {
        "description": "annotation only",
        "$ref": "#/components/schemas/TableIdentifier",
    }
    page_token = schemas["PageToken"]
    page_token.pop("nullable")
    page_token["type"] = ["string", "null"]
    schemas["ErrorModel"]["properties"]["code"] = {"type": "integer", "exclusiveMinimum": 399, "maximum": 600}
    mine = copy.deepcopy(ours)
    mine["components"]["schemas"]["ErrorModel"]["properties"]["code"] = {
        "type": "integer",
        "minimum": 399,
        "exclusiveMinimum": True,
        "maximum": 600,
    }
    assert compare_specs(mine, upstream_like) == []
