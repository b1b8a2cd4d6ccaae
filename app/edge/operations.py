"""The operations of the yamls as a route table, compiled once from ``openapi/*.yaml``.

The dispatcher (``app.edge.dispatch``) routes every request of the APIs with it and reads most
requests' parameters and bodies with it, exactly as connexion would: this table is what it
knows, and all of it comes from the yamls - paths, methods, operationIds, parameters and their
schemas. There is no per-endpoint code here.

Matching follows connexion's router: a request's path segments against each template of the
same length, a literal segment preferred to a parameter (``/tables/rename`` before
``/tables/{table}``), a parameter matching one non-empty segment.

A parameter is read as connexion reads it (the same type coercion and ``null`` rule, the same
argument names, schema defaults applied) and validated with a validator compiled here, once,
with the same draft and format checker as connexion's (``app.edge.validation``). Anything the
table cannot read with certainty - a repeated key, an undeclared one (the API is strict), a
value that does not coerce or validate - raises ``Unreadable``, and the dispatcher has
connexion's validation read the request (``app.edge.contract``): its errors are the only
validation errors the API answers.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl

from connexion.decorators.parameter import sanitized, unwrap_decorators
from connexion.exceptions import NonConformingResponseBody
from connexion.json_schema import Draft4ResponseValidator, format_error_with_path, resolve_refs
from connexion.utils import is_null, is_nullable, make_type
from jsonschema import Draft4Validator, ValidationError
from pydantic import BaseModel

from app.rules.requests import parse_request

HTTP_METHODS = ("get", "put", "post", "delete", "head", "patch")


class Unreadable(Exception):
    """The request is not one the table reads with certainty: connexion's validation reads it."""


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: where it is, the handler's name for it, and how to read it."""

    name: str
    location: str  # path | query | header
    argument: str  # connexion's sanitized name, as the handler receives it
    required: bool
    schema: dict[str, Any]
    is_valid: Callable[[Any], bool]

    def read(self, raw: str) -> Any:
        """The value connexion would pass, or ``Unreadable`` where it would refuse or might differ."""
        if is_nullable(self.schema) and is_null(raw):
            return None
        kind = self.schema.get("type")
        try:
            if kind == "array":
                item = self.schema.get("items", {})
                parts = [part.strip() for part in raw.split(",")] if self.location == "header" else [raw]
                value: Any = [make_type(part, item["type"], item.get("format")) for part in parts]
            elif kind == "integer":
                if not raw.isascii() or not raw.isdigit() or len(raw) > 18 or (raw[0] == "0" and raw != "0"):
                    raise Unreadable  # int() takes "+5", " 5" and "1_0": leave those to connexion
                value = int(raw)
            elif kind in ("string", "boolean"):
                value = make_type(raw, kind, self.schema.get("format"))
            else:
                raise Unreadable  # number, object: connexion's reading decides
        except (ValueError, TypeError, KeyError) as exc:
            raise Unreadable from exc
        if not self.is_valid(value):
            raise Unreadable
        return value


@dataclass(frozen=True)
class Operation:
    """One operation of the spec: its route, its parameters, and what its handler accepts."""

    operation_id: str
    spec_path: str  # the path as its yaml names it (without the API's base path)
    method: str  # upper case
    segments: tuple[str | None, ...]  # a literal, or None for a parameter (named in ``names``)
    names: tuple[str, ...]
    parameters: tuple[Parameter, ...]
    has_body: bool
    arguments: frozenset[str] | None  # the handler's parameter names; None: it takes **kwargs
    body_reader: Callable[[bytes], Any] | None = None  # for the operations with a JSON body
    body_model: Callable[[Any], Any] | None = None  # the handler's typed body: the JSON parsed into it
    response_check: Callable[[int, bytes], None] | None = None  # GROWLER_VALIDATE_RESPONSES (tests)

    @property
    def specificity(self) -> tuple[int, ...]:
        """Literal segments first, left to right: how connexion's router orders its routes."""
        return tuple(0 if segment is not None else 1 for segment in self.segments)

    def read(self, path_values: list[str], query: bytes, headers: dict[bytes, list[bytes]]) -> dict[str, Any]:
        """The keyword arguments connexion would call the handler with; ``Unreadable`` otherwise."""
        kwargs: dict[str, Any] = {}
        by_name = dict(zip(self.names, path_values, strict=True))
        given = _query(query)
        declared_query = {p.name for p in self.parameters if p.location == "query"}
        if not given.keys() <= declared_query:
            raise Unreadable  # strict validation: connexion answers 400
        for parameter in self.parameters:
            raw = _raw_value(parameter, by_name, given, headers)
            if raw is None:
                if parameter.required:
                    raise Unreadable
                default = parameter.schema.get("default")
                if default is not None and parameter.location == "query" and self._accepts(parameter.argument):
                    kwargs[parameter.argument] = default
                continue
            value = parameter.read(raw)
            if parameter.location == "path" or parameter.location == "query" and self._accepts(parameter.argument):
                kwargs[parameter.argument] = value
        return kwargs

    def read_body(self, data: bytes) -> Any:
        """The JSON body connexion would pass as ``body``; ``Unreadable`` unless it is valid."""
        if self.body_reader is None:
            raise Unreadable
        try:
            value = self.body_reader(data)
        except Exception as exc:  # noqa: BLE001 - whatever connexion would refuse, and how, is its to say
            raise Unreadable from exc
        return self.typed(value)

    def typed(self, value: Any) -> Any:
        """A body valid against the yaml, as the model the handler takes (its ``body``
        annotation): parsed once, here at the edge; BadRequest when the model refuses it."""
        if self.body_model is None or value is None:
            return value
        return self.body_model(value)

    def _accepts(self, argument: str) -> bool:
        return self.arguments is None or argument in self.arguments


class RouteTable:
    """Every operation of a spec, looked up by method and path."""

    def __init__(self, operations: Iterable[Operation]) -> None:
        # by method, length and first segment (``v1``, ``management``; None for a parameter): a
        # request is compared with the templates of its own API only
        self._routes: dict[tuple[str, int, str | None], list[Operation]] = {}
        for operation in operations:
            key = (operation.method, len(operation.segments), operation.segments[1])
            self._routes.setdefault(key, []).append(operation)
        for candidates in self._routes.values():
            candidates.sort(key=lambda operation: operation.specificity)
        self._parameter_first = any(key[2] is None for key in self._routes)

    def match(self, method: str, path: str) -> tuple[Operation, list[str]] | None:
        """The operation a request is for, with the path parameters' values (decoded).

        A HEAD without an operation of its own is its GET's (Flask answers HEAD on every GET
        rule, without a body): the dispatcher sends the GET's headers only.
        """
        found = self._match(method, path)
        if found is None and method == "HEAD":
            return self._match("GET", path)
        return found

    def _match(self, method: str, path: str) -> tuple[Operation, list[str]] | None:
        segments = path.split("/")
        if len(segments) < 2:
            return None
        candidates = self._routes.get((method, len(segments), segments[1]), ())
        if self._parameter_first:  # a template starting with a parameter (none of the yamls' today)
            candidates = [*candidates, *self._routes.get((method, len(segments), None), ())]
        for operation in candidates:
            values = []
            for template, segment in zip(operation.segments, segments, strict=True):
                if template is None:
                    if not segment:
                        break
                    values.append(segment)
                elif template != segment:
                    break
            else:
                return operation, values
        return None

    def operations(self) -> list[Operation]:
        return [operation for candidates in self._routes.values() for operation in candidates]


def compile_operations(
    spec: dict[str, Any],
    handler_for: Callable[[str], Callable[..., Any] | None],
    *,
    base_path: str = "",
    body_validator: type | None = None,
    check_responses: bool = False,
) -> list[Operation]:
    """The operations of ``spec`` (the dict connexion is given) under ``base_path``;
    ``handler_for`` names each handler.

    An operation with a JSON request body gets it read with ``body_validator`` (the class
    connexion validates bodies with: ``validation_map``'s), built once here from the body's
    schema. With ``check_responses`` every operation gets a check of its JSON answers against
    the yaml, as connexion's ``validate_responses`` does.
    """
    # connexion's own resolution, once: table schemas nest (a struct's fields are types), so
    # the resolved spec refers back to itself, as the one connexion validates against does
    resolved = resolve_refs(spec)
    operations = []
    for template, item in resolved["paths"].items():
        common = item.get("parameters", [])
        for method, declared in item.items():
            if method not in HTTP_METHODS:
                continue
            own = declared.get("parameters", [])
            parameters = {(p["in"], p["name"]): p for p in [*common, *own]}  # an operation's own win
            operation = _operation(
                base_path + template, template, method, declared, list(parameters.values()), handler_for
            )
            if _json_body(declared) and body_validator is not None:
                operation = replace(operation, body_reader=_body_reader(declared, body_validator))
            if check_responses:
                operation = replace(operation, response_check=_response_check(declared))
            operations.append(operation)
    return operations


def _json_body(declared: dict[str, Any]) -> bool:
    return "application/json" in declared.get("requestBody", {}).get("content", {})


def _operation(
    template: str,
    spec_path: str,
    method: str,
    declared: dict[str, Any],
    parameters: list[dict[str, Any]],
    handler_for: Callable[[str], Callable[..., Any] | None],
) -> Operation:
    segments = tuple(None if part.startswith("{") else part for part in template.split("/"))
    names = tuple(part[1:-1] for part in template.split("/") if part.startswith("{"))
    handler = handler_for(declared["operationId"])
    arguments: frozenset[str] | None = frozenset()
    body_model = None
    if handler is not None:
        signature = inspect.signature(unwrap_decorators(handler))
        kinds = {p.kind for p in signature.parameters.values()}
        arguments = None if inspect.Parameter.VAR_KEYWORD in kinds else frozenset(signature.parameters)
        body_model = body_model_of(handler)
    return Operation(
        operation_id=declared["operationId"],
        spec_path=spec_path,
        method=method.upper(),
        segments=segments,
        names=names,
        parameters=tuple(_parameter(p) for p in parameters),
        has_body="requestBody" in declared,
        arguments=arguments,
        body_model=body_model,
    )


def body_model_of(handler: Callable[..., Any]) -> Callable[[Any], Any] | None:
    """The parser of the model a handler's ``body`` is annotated with (``X`` or ``X | None``,
    ``X`` a pydantic model); None for a handler without a body."""
    hint = typing.get_type_hints(unwrap_decorators(handler)).get("body")
    for candidate in typing.get_args(hint) or (hint,):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            model = candidate
            return lambda value: parse_request(model, value)
    return None


def _body_reader(declared: dict[str, Any], validator: type) -> Callable[[bytes], Any]:
    body = declared["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    checker = validator(
        schema=schema, required=bool(body.get("required")), nullable=False, encoding="utf-8", strict_validation=True
    )
    return checker.accepted


def _response_check(declared: dict[str, Any]) -> Callable[[int, bytes], None]:
    """connexion's response validation for one operation: the JSON body of the status's response
    (else ``default``) against its schema; ``NonConformingResponseBody`` (a 500) when it is not."""
    responses = declared.get("responses", {})

    def check(status: int, body: bytes) -> None:
        response = responses.get(str(status), responses.get("default", {}))
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if schema is None or not body:
            return
        try:
            Draft4ResponseValidator(schema, format_checker=Draft4Validator.FORMAT_CHECKER).validate(json.loads(body))
        except ValidationError as exc:
            raise NonConformingResponseBody(
                detail=f"Response body does not conform to specification. {exc.message}{format_error_with_path(exc)}"
            ) from exc

    return check


def _parameter(declared: dict[str, Any]) -> Parameter:
    schema = declared.get("schema", {})
    return Parameter(
        name=declared["name"],
        location=declared["in"],
        argument=sanitized(declared["name"]),
        required=bool(declared.get("required")),
        schema=schema,
        is_valid=_check(schema),
    )


_ANNOTATIONS = {"description", "example", "examples", "title"}


def _check(schema: dict[str, Any]) -> Callable[[Any], bool]:
    """The validation of one parameter's value, compiled once.

    A plain string, or a string from an enum, is decided without jsonschema (the coerced value
    is a ``str`` already): most parameters are path segments, and a validator call per segment
    was a visible share of a read. Anything else gets a Draft 4 validator with the format
    checker, as connexion validates parameters.
    """
    constraints = set(schema) - _ANNOTATIONS
    if schema.get("type") == "string" and constraints == {"type"}:
        return lambda value: isinstance(value, str)
    if schema.get("type") == "string" and constraints == {"type", "enum"}:
        allowed = frozenset(v for v in schema["enum"] if isinstance(v, str))
        return lambda value: isinstance(value, str) and value in allowed
    return Draft4Validator(schema, format_checker=Draft4Validator.FORMAT_CHECKER).is_valid


def _query(query: bytes) -> dict[str, str]:
    """The query's keys and values; ``Unreadable`` for a repeated key or anything not plain UTF-8."""
    if not query:
        return {}
    try:
        pairs = parse_qsl(query.decode("ascii"), keep_blank_values=True, strict_parsing=True, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise Unreadable from exc
    given = dict(pairs)
    if len(given) != len(pairs):
        raise Unreadable
    return given


def _raw_value(
    parameter: Parameter, path: dict[str, str], query: dict[str, str], headers: dict[bytes, list[bytes]]
) -> str | None:
    if parameter.location == "path":
        return path.get(parameter.name)
    if parameter.location == "query":
        return query.get(parameter.name)
    if parameter.location == "header":
        values = headers.get(parameter.name.lower().encode("latin-1"))
        if values is None:
            return None
        if len(values) != 1:
            raise Unreadable
        return values[0].decode("latin-1")
    raise Unreadable  # cookie parameters: none in the spec
