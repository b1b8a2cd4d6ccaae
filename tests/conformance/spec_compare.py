"""The drift comparer of test_spec_drift.py: openapi/catalog.yaml against the upstream Iceberg REST spec.

Our contract is an OpenAPI 3.0.3 rewrite of the upstream 3.1 document with our own prose.
`compare_specs` ignores prose and examples and compares structure only: operations,
operation ids, parameters, request bodies, response codes and bodies, and every schema
(properties, required lists, enums, discriminators, types, formats, bounds, $refs),
after folding 3.1 spellings into their 3.0 equivalents (`const` -> one-value `enum`,
`type: [T, "null"]` -> `nullable`, `$ref` with siblings -> `allOf`, numeric exclusive bounds).
Every deviation we allow is named in ALLOWED_DEVIATIONS."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
OURS_PATH = REPO_ROOT / "openapi" / "catalog.yaml"
UPSTREAM_PATH = REPO_ROOT.parent / "shared" / "spec" / "iceberg-rest-catalog-open-api.yaml"

EXPECTED_OPERATIONS = 35
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

Allowances = dict[str, set[str]]

ERROR_MODEL = "#/components/schemas/ErrorModel"
ERROR_ENVELOPE = "#/components/schemas/IcebergErrorResponse"

# Aspects of a deviation beyond a plain structural fact (see `_fold_deviations`).
ONE_OF_AS_ANY_OF = "oneOf -> anyOf"  # same members, but anyOf: upstream's oneOf members overlap
ERROR_MODEL_AS_ENVELOPE = "ErrorModel -> IcebergErrorResponse"  # error body is {"error": ErrorModel}
# IcebergErrorResponse's envelope without its additionalProperties: false (so a `status` may sit beside it)
OPEN_ERROR_ENVELOPE = "IcebergErrorResponse -> open envelope"
_OPEN_ENVELOPE = {"type": "object", "required": ["error"], "properties": {"error": {"$ref": ERROR_MODEL}}}

_VIEW = "/v1/{prefix}/namespaces/{namespace}/views"
_JSON = "[application/json] schema"

# Every deliberate, documented deviation from upstream, in one place: location -> aspects allowed to
# differ. Each site carries a YAML comment saying why. Anything else that differs is drift, and every
# entry here must still be in use (`test_documented_deviations_are_in_place`).
ALLOWED_DEVIATIONS: Allowances = {
    # we reject unknown fields in these request bodies
    "schema CreateNamespaceRequest": {"additionalProperties"},
    "schema UpdateNamespacePropertiesRequest": {"additionalProperties"},
    # upstream's members overlap, so oneOf rejects valid values (integer/string literals, `variant`,
    # an async planning answer); anyOf accepts them
    "schema Type": {ONE_OF_AS_ANY_OF},
    "schema PrimitiveTypeValue": {ONE_OF_AS_ANY_OF},
    "schema PlanTableScanResult": {ONE_OF_AS_ANY_OF},
    # upstream's FailedPlanningResult is allOf IcebergErrorResponse (additionalProperties: false) and
    # a required `status`: unsatisfiable; ours keeps the envelope but lets `status` sit beside it
    "schema FailedPlanningResult/allOf[0]": {OPEN_ERROR_ENVELOPE},
    # upstream declares these error bodies as a bare ErrorModel; servers send, and clients parse,
    # the IcebergErrorResponse envelope like every other error
    **{
        f"{where} {_JSON}": {ERROR_MODEL_AS_ENVELOPE}
        for where in (
            f"GET {_VIEW} response 404",
            f"POST {_VIEW} response 404",
            f"POST {_VIEW} response 409",
            f"GET {_VIEW}/{{view}} response 404",
            f"POST {_VIEW}/{{view}} response 404",
            f"POST {_VIEW}/{{view}} response 409",
            f"POST {_VIEW}/{{view}} response 500",
            f"POST {_VIEW}/{{view}} response 502",
            f"POST {_VIEW}/{{view}} response 504",
            f"POST {_VIEW}/{{view}} response 5XX",
            f"DELETE {_VIEW}/{{view}} response 404",
            "POST /v1/{prefix}/views/rename response 404",
            "POST /v1/{prefix}/views/rename response 409",
            "component response UnsupportedOperationResponse",
        )
    },
}

# Schema keywords that carry structure; everything else (descriptions, examples, ...) is ignored.
STRUCTURAL = {
    "$ref",
    "type",
    "format",
    "nullable",
    "enum",
    "const",
    "required",
    "properties",
    "items",
    "additionalProperties",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "discriminator",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "uniqueItems",
}
SCALAR_ASPECTS = (
    "$ref",
    "type",
    "format",
    "nullable",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "pattern",
    "uniqueItems",
)


def load_spec(path: Path) -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open(encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)


# --------------------------------------------------------------------------- helpers


def _deref(doc: dict, node: object) -> object:
    """Follow local `$ref`s (e.g. to components/parameters) until a concrete object is reached."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if ref in seen or not ref.startswith("#/"):
            break
        seen.add(ref)
        target = doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return {"$unresolved": ref}
            target = target[part]
        node = target
    return node


def operations(doc: dict) -> dict[tuple[str, str], dict]:
    ops = {}
    for path, item in (doc.get("paths") or {}).items():
        for method in HTTP_METHODS:
            if method in item:
                ops[(path, method)] = item[method]
    return ops


def _label(key: tuple[str, str]) -> str:
    return f"{key[1].upper()} {key[0]}"


def _canonical(schema: dict) -> dict:
    """Structural keywords only, with 3.1 spellings folded into their 3.0 forms."""
    s = {k: v for k, v in schema.items() if k in STRUCTURAL}
    if "const" in s:
        s["enum"] = [s.pop("const")]
    if isinstance(s.get("type"), list):
        types = [t for t in s["type"] if t != "null"]
        if len(types) < len(s["type"]):
            s["nullable"] = True
        s["type"] = types[0] if len(types) == 1 else sorted(types)
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in s and not isinstance(s[bound], bool):
            s[plain] = s.pop(bound)
            s[bound] = True
    if not s.get("nullable"):
        s.pop("nullable", None)
    if s.get("exclusiveMinimum") is False:
        del s["exclusiveMinimum"]
    if s.get("exclusiveMaximum") is False:
        del s["exclusiveMaximum"]
    if "$ref" in s and len(s) > 1:  # 3.0 ignores $ref siblings, so they must live in allOf
        s["allOf"] = [{"$ref": s.pop("$ref")}, *s.get("allOf", [])]
    if set(s) == {"allOf"} and len(s["allOf"]) == 1 and isinstance(s["allOf"][0], dict):
        member = _canonical(s["allOf"][0])
        if set(member) == {"$ref"}:  # `allOf: [$ref]` wrapping only annotations is just the $ref
            s = member
    return s


def _facts(s: dict) -> dict:
    facts = {k: s[k] for k in SCALAR_ASPECTS if k in s}
    if "enum" in s:
        facts["enum"] = sorted(s["enum"], key=lambda v: json.dumps(v, sort_keys=True))
    if "required" in s:
        facts["required"] = sorted(s["required"])
    if "properties" in s:
        facts["properties"] = sorted(s["properties"])
    ap = s.get("additionalProperties")
    if ap is not None:
        facts["additionalProperties"] = ap if isinstance(ap, bool) else "<schema>"
    if "discriminator" in s:
        d = s["discriminator"] or {}
        facts["discriminator.propertyName"] = d.get("propertyName")
        facts["discriminator.mapping"] = dict(sorted((d.get("mapping") or {}).items()))
    for comb in ("allOf", "oneOf", "anyOf"):
        if comb in s:
            facts[f"{comb} members"] = len(s[comb])
    if "not" in s:
        facts["not"] = "<schema>"
    return facts


def _describe(aspect: str, ours: object, theirs: object) -> str:
    if isinstance(ours, list) and isinstance(theirs, list):
        key = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731 - enum values may be unhashable
        o_keys, t_keys = {key(v) for v in ours}, {key(v) for v in theirs}
        extra = [v for v in ours if key(v) not in t_keys]
        missing = [v for v in theirs if key(v) not in o_keys]
        if extra or missing:
            parts = []
            if missing:
                parts.append(f"missing in ours {missing}")
            if extra:
                parts.append(f"not in upstream {extra}")
            return f"{aspect} differ: " + "; ".join(parts)
    if ours is None:
        return f"{aspect}: upstream has {theirs!r}, ours has none"
    if theirs is None:
        return f"{aspect}: ours has {ours!r}, upstream has none"
    return f"{aspect}: ours {ours!r} != upstream {theirs!r}"


def _fold_deviations(o: dict, t: dict, allowed: set[str]) -> dict:
    """Undo an allowed deviation in our (canonical) schema, only when it has exactly the allowed shape.

    What remains is compared as usual, so the members of an anyOf are still checked one by one.
    """
    if ONE_OF_AS_ANY_OF in allowed and "anyOf" in o and "oneOf" in t and "oneOf" not in o and "anyOf" not in t:
        o = {("oneOf" if k == "anyOf" else k): v for k, v in o.items()}
    if ERROR_MODEL_AS_ENVELOPE in allowed and o.get("$ref") == ERROR_ENVELOPE and t.get("$ref") == ERROR_MODEL:
        o = {**o, "$ref": ERROR_MODEL}
    if OPEN_ERROR_ENVELOPE in allowed and o == _OPEN_ENVELOPE and t == {"$ref": ERROR_ENVELOPE}:
        o = {"$ref": ERROR_ENVELOPE}
    return o


def diff_schema(ours: object, theirs: object, where: str, problems: list[str], allowances: Allowances) -> None:
    """Walk two schemas in parallel and record every structural difference under `where`."""
    if not isinstance(ours, dict) or not isinstance(theirs, dict):
        if ours != theirs:
            problems.append(f"{where}: {ours!r} != upstream {theirs!r}")
        return
    allowed = allowances.get(where, set())
    o, t = _canonical(ours), _canonical(theirs)
    o = _fold_deviations(o, t, allowed)
    fo, ft = _facts(o), _facts(t)
    for aspect in sorted(set(fo) | set(ft)):
        if aspect in allowed:
            continue
        if fo.get(aspect) != ft.get(aspect):
            problems.append(f"{where}: {_describe(aspect, fo.get(aspect), ft.get(aspect))}")
    for name in sorted(set(o.get("properties") or {}) & set(t.get("properties") or {})):
        diff_schema(o["properties"][name], t["properties"][name], f"{where}.{name}", problems, allowances)
    if isinstance(o.get("items"), dict) and isinstance(t.get("items"), dict):
        diff_schema(o["items"], t["items"], f"{where}[items]", problems, allowances)
    if isinstance(o.get("additionalProperties"), dict) and isinstance(t.get("additionalProperties"), dict):
        diff_schema(o["additionalProperties"], t["additionalProperties"], f"{where}{{*}}", problems, allowances)
    for comb in ("allOf", "oneOf", "anyOf"):
        if comb in o and comb in t and len(o[comb]) == len(t[comb]):
            for i, (mo, mt) in enumerate(zip(o[comb], t[comb], strict=True)):
                diff_schema(mo, mt, f"{where}/{comb}[{i}]", problems, allowances)
    if isinstance(o.get("not"), dict) and isinstance(t.get("not"), dict):
        diff_schema(o["not"], t["not"], f"{where}/not", problems, allowances)


def _diff_names(kind: str, ours: set, theirs: set, problems: list[str]) -> None:
    for name in sorted(theirs - ours):
        problems.append(f"{kind} {name}: in upstream, missing in ours")
    for name in sorted(ours - theirs):
        problems.append(f"{kind} {name}: in ours, not in upstream")


def _effective_parameters(doc: dict, path: str, op: dict) -> dict[tuple[str, str], dict]:
    params = {}
    for raw in [*(doc["paths"][path].get("parameters") or []), *(op.get("parameters") or [])]:
        p = _deref(doc, raw)
        params[(p.get("name"), p.get("in"))] = p  # operation-level entries override path-level ones
    return params


def _diff_parameter(ours: dict, theirs: dict, where: str, problems: list[str], allowances: Allowances) -> None:
    if bool(ours.get("required")) != bool(theirs.get("required")):
        problems.append(
            f"{where}: required is {bool(ours.get('required'))} in ours, {bool(theirs.get('required'))} upstream"
        )
    diff_schema(ours.get("schema") or {}, theirs.get("schema") or {}, f"{where} schema", problems, allowances)


def _diff_content(ours: dict, theirs: dict, where: str, problems: list[str], allowances: Allowances) -> None:
    oc, tc = ours.get("content") or {}, theirs.get("content") or {}
    _diff_names(f"{where} media type", set(oc), set(tc), problems)
    for mt in sorted(set(oc) & set(tc)):
        diff_schema(
            oc[mt].get("schema") or {}, tc[mt].get("schema") or {}, f"{where} [{mt}] schema", problems, allowances
        )


def compare_specs(ours: dict, upstream: dict, allowances: Allowances = ALLOWED_DEVIATIONS) -> list[str]:
    """Return one readable line per structural difference between two loaded OpenAPI documents.

    Differences listed in `allowances` (location -> aspects) are not reported.
    """
    problems: list[str] = []

    o_ops, t_ops = operations(ours), operations(upstream)
    for key in sorted(set(t_ops) - set(o_ops)):
        problems.append(f"operation {_label(key)}: in upstream, missing in ours")
    for key in sorted(set(o_ops) - set(t_ops)):
        problems.append(f"operation {_label(key)}: in ours, not in upstream")

    for key in sorted(set(o_ops) & set(t_ops)):
        label, path = _label(key), key[0]
        oo, to = o_ops[key], t_ops[key]
        if oo.get("operationId") != to.get("operationId"):
            problems.append(f"{label}: operationId {oo.get('operationId')!r} != upstream {to.get('operationId')!r}")

        op_params = _effective_parameters(ours, path, oo)
        up_params = _effective_parameters(upstream, path, to)
        _diff_names(
            f"{label} parameter", {f"{n} ({i})" for n, i in op_params}, {f"{n} ({i})" for n, i in up_params}, problems
        )
        for pk in sorted(set(op_params) & set(up_params)):
            _diff_parameter(op_params[pk], up_params[pk], f"{label} parameter {pk[0]} ({pk[1]})", problems, allowances)

        o_body = _deref(ours, oo.get("requestBody")) or {}
        t_body = _deref(upstream, to.get("requestBody")) or {}
        if bool(o_body) != bool(t_body):
            problems.append(
                f"{label}: request body {'present' if o_body else 'absent'} in ours, "
                f"{'present' if t_body else 'absent'} upstream"
            )
        elif o_body:
            if bool(o_body.get("required")) != bool(t_body.get("required")):
                problems.append(
                    f"{label}: request body required is {bool(o_body.get('required'))} in ours, "
                    f"{bool(t_body.get('required'))} upstream"
                )
            _diff_content(o_body, t_body, f"{label} request body", problems, allowances)

        o_resp = {str(c): r for c, r in (oo.get("responses") or {}).items()}
        t_resp = {str(c): r for c, r in (to.get("responses") or {}).items()}
        _diff_names(f"{label} response", set(o_resp), set(t_resp), problems)
        for code in sorted(set(o_resp) & set(t_resp)):
            o_ref, t_ref = o_resp[code].get("$ref"), t_resp[code].get("$ref")
            if o_ref and o_ref == t_ref:
                continue  # the same component response: compared once, under its own name, below
            _diff_content(
                _deref(ours, o_resp[code]),
                _deref(upstream, t_resp[code]),
                f"{label} response {code}",
                problems,
                allowances,
            )

    o_comp, t_comp = ours.get("components") or {}, upstream.get("components") or {}

    o_schemas, t_schemas = o_comp.get("schemas") or {}, t_comp.get("schemas") or {}
    _diff_names("schema", set(o_schemas), set(t_schemas), problems)
    for name in sorted(set(o_schemas) & set(t_schemas)):
        diff_schema(o_schemas[name], t_schemas[name], f"schema {name}", problems, allowances)

    o_params, t_params = o_comp.get("parameters") or {}, t_comp.get("parameters") or {}
    _diff_names("component parameter", set(o_params), set(t_params), problems)
    for name in sorted(set(o_params) & set(t_params)):
        op_, tp_ = _deref(ours, o_params[name]), _deref(upstream, t_params[name])
        where = f"component parameter {name}"
        for field in ("name", "in"):
            if op_.get(field) != tp_.get(field):
                problems.append(f"{where}: {field} {op_.get(field)!r} != upstream {tp_.get(field)!r}")
        _diff_parameter(op_, tp_, where, problems, allowances)

    o_resps, t_resps = o_comp.get("responses") or {}, t_comp.get("responses") or {}
    _diff_names("component response", set(o_resps), set(t_resps), problems)
    for name in sorted(set(o_resps) & set(t_resps)):
        _diff_content(
            _deref(ours, o_resps[name]),
            _deref(upstream, t_resps[name]),
            f"component response {name}",
            problems,
            allowances,
        )

    return problems
