"""Request validation tweaks on top of connexion's defaults."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any

import fastjsonschema
from connexion.datastructures import MediaTypeDict
from connexion.frameworks.flask import FlaskJSONProvider
from connexion.json_schema import Draft4RequestValidator
from connexion.utils import is_null, is_nullable
from connexion.validators import VALIDATOR_MAP, JSONRequestBodyValidator, ParameterValidator
from jsonschema import Draft4Validator, ValidationError, validators

from app.ground.limits import Limits, check_request_shape, load_json


class _ValidatorCache:
    """One compiled jsonschema validator per schema of the spec.

    connexion 3.3 builds a new validator (and deep-copies each parameter's schema) for every
    parameter and body of every request; the profile of loadTable showed a quarter of a worker's
    CPU time there. The schemas are the spec's own, long-lived dicts, so their identity is the
    key (the dict is kept alive with its validator); the bound only matters if they were not.
    """

    def __init__(self, factory: Any, capacity: int = 1024) -> None:
        self._factory = factory
        self._capacity = capacity
        self._validators: dict[int, tuple[dict[str, Any], Any]] = {}
        self._lock = threading.Lock()

    def get(self, schema: dict[str, Any]) -> Any:
        cached = self._validators.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        validator = self._factory(schema, format_checker=Draft4Validator.FORMAT_CHECKER)
        with self._lock:
            if len(self._validators) >= self._capacity:
                self._validators.clear()
            self._validators[id(schema)] = (schema, validator)
        return validator


def _any_of_trying_last_match_first(validator: Any, any_of: list[Any], instance: Any, schema: Any) -> Any:
    """``anyOf`` as jsonschema has it, trying first the branch that matched a similar instance.

    A commit's ``updates`` are ``anyOf`` 23 update schemas told apart by ``action``; plain
    ``anyOf`` walks them in order, so an append's two updates cost about twenty failed
    validations (a quarter of a commit's CPU time). Whether some branch matches does not depend
    on the order they are tried in, and the error when none does lists them all, so remembering
    which branch matched last time for the same kind of instance (its type and its ``action`` or
    ``type`` member) changes the cost only.
    """
    hint = _BRANCH_HINTS.get((id(any_of), *_shape(instance)))
    order = range(len(any_of)) if hint is None else [hint, *(i for i in range(len(any_of)) if i != hint)]
    all_errors = []
    for index in order:
        errors = list(validator.descend(instance, any_of[index], schema_path=index))
        if not errors:
            if len(_BRANCH_HINTS) >= _MAX_HINTS:  # shapes come from requests: keep it bounded
                _BRANCH_HINTS.clear()
            _BRANCH_HINTS[(id(any_of), *_shape(instance))] = index
            return
        all_errors.extend(errors)
    yield ValidationError(f"{instance!r} is not valid under any of the given schemas", context=all_errors)


def _shape(instance: Any) -> tuple[str, Any, Any]:
    if isinstance(instance, dict):
        action, kind = instance.get("action"), instance.get("type")
        return "object", action if isinstance(action, str) else None, kind if isinstance(kind, str) else None
    return type(instance).__name__, None, None


# (id of an anyOf list of the spec, instance shape) -> index of the branch that matched. The lists
# live as long as the spec; a permissive branch could match any ``type`` string, hence the bound.
_BRANCH_HINTS: dict[tuple[int, str, Any, Any], int] = {}
_MAX_HINTS = 4096

_PARAMETER_VALIDATORS = _ValidatorCache(Draft4Validator)
_BODY_VALIDATORS = _ValidatorCache(
    validators.extend(Draft4RequestValidator, {"anyOf": _any_of_trying_last_match_first})
)


class SimpleStyleHeaderValidator(ParameterValidator):
    """Validates parameters with cached validators, and array-typed headers as the ``simple`` style.

    connexion 3.3 validates the raw header string against ``type: array``, so
    ``X-Iceberg-Access-Delegation: vended-credentials`` - sent by PyIceberg on every request -
    would be refused. Split it on commas first, as the style says.
    """

    def validate_parameter(  # type: ignore[override]
        self, parameter_type: str, value: Any, param: dict[str, Any], param_name: str | None = None
    ) -> str | None:
        """connexion's rules (null when nullable, required), without a validator per call."""
        if is_nullable(param) and is_null(value):
            return None
        if value is not None:
            try:
                _PARAMETER_VALIDATORS.get(param.get("schema", param)).validate(value)
            except ValidationError as exception:
                return exception.message  # not str(): that appends the whole schema and instance
            return None
        if param.get("required"):
            return f"Missing {parameter_type} parameter '{param['name']}'"
        return None

    def validate_header_parameter(self, param: dict[str, Any], request: Any) -> str | None:
        value = request.headers.get(param["name"])
        if value is not None and param.get("schema", {}).get("type") == "array":
            value = [part.strip() for part in value.split(",")]
        return self.validate_parameter("header", value, param)


class NullMeansAbsentBodyValidator(JSONRequestBodyValidator):
    """Validates a JSON body with ``null`` on an optional top-level member read as "not given".

    The Java client serializes unset fields as null (``"location": null, "write-order": null``
    in every CreateTableRequest Spark sends); the spec's schemas do not allow null there, and
    refusing them would refuse every table Spark creates. The services treat None as absent.

    Parsing and validation run in a small thread pool, not on the event loop: connexion does
    both inline in its ASGI middleware, so a burst of large bodies (thousands of updates take
    seconds of jsonschema) kept the loop from answering anything else - ``/healthz`` and
    gunicorn's heartbeat included - until the worker was killed. The body is parsed within
    ``limits`` (``app.ground.limits``) and its shape capped before the schema is walked.
    """

    limits: Limits = Limits()

    @property
    def _validator(self) -> Any:
        return _BODY_VALIDATORS.get(self._schema)

    async def _parse(self, stream: Any, scope: Any) -> Any:
        data = b"".join([chunk async for chunk in stream])
        if not data:
            return None
        return await asyncio.get_running_loop().run_in_executor(_executor(), self._parse_and_validate, data)

    def _parse_and_validate(self, data: bytes) -> object:
        self._validate_now(self._bounded(data))
        return _VALIDATED

    def accepted(self, data: bytes) -> Any:
        """The body as the handler receives it (nulls kept), once parsed within the limits and
        valid against the schema; an exception otherwise (which one is connexion's to say).

        The dispatcher's check (app/edge/operations.py), on the event loop, with one instance
        per operation: a schema within ``compiled_check``'s keywords is checked by the compiled
        validator, seven times cheaper than jsonschema's; any other by jsonschema. connexion's own
        per-request instances never come here: what they answer stays jsonschema's.
        """
        body = self._bounded(data)
        if self._compiled is None:
            self._validate_now(body)
        else:
            self._compiled(self._without_absent(body))
        return body

    @cached_property
    def _compiled(self) -> Callable[[Any], Any] | None:
        return compiled_check(self._schema)

    def _bounded(self, data: bytes) -> Any:
        body = load_json(data, self.limits)
        check_request_shape(body, self.limits)
        return body

    def _validate(self, body: Any) -> dict | None:
        if body is _VALIDATED:  # done in the thread, by _parse
            return None
        return self._validate_now(body)

    def _validate_now(self, body: Any) -> dict | None:
        return super()._validate(self._without_absent(body))

    def _without_absent(self, body: Any) -> Any:
        if isinstance(body, dict) and isinstance(self._schema, dict):
            required = set(self._schema.get("required", []))
            return {key: value for key, value in body.items() if value is not None or key in required}
        return body


# The keywords and types whose Draft 4 meaning fastjsonschema's compiled code and jsonschema (with
# connexion's extensions, which concern ``nullable`` and read/write-only) share exactly; no formats,
# no numbers (their integer and float rules are where validators differ).
_COMPILED_KEYWORDS = frozenset(
    {"type", "properties", "required", "enum", "additionalProperties", "items", "description", "example", "title"}
)
_COMPILED_TYPES = frozenset({"object", "array", "string"})


def compiled_check(schema: Any) -> Callable[[Any], Any] | None:
    """fastjsonschema's compiled validator for a schema within the keywords above, else None."""
    if not _compilable(schema):
        return None
    return fastjsonschema.compile({**schema, "$schema": "http://json-schema.org/draft-04/schema#"})


def _compilable(node: Any) -> bool:
    if isinstance(node, bool):
        return True  # additionalProperties: true | false
    if not isinstance(node, dict) or not node.keys() <= _COMPILED_KEYWORDS:
        return False
    if "type" in node and node["type"] not in _COMPILED_TYPES:
        return False
    if not all(isinstance(value, str) for value in node.get("enum", [])):
        return False
    children = [*node.get("properties", {}).values()]
    children += [node[key] for key in ("additionalProperties", "items") if key in node]
    return all(_compilable(child) for child in children)


_VALIDATED = object()  # _parse's result once the body is parsed and valid (connexion discards it)
# Few threads: validation is CPU-bound, more threads would only contend with the event loop for
# the GIL; a burst queues here instead of occupying the threads that run the handlers.
_VALIDATION_THREADS = 2
_executor_lock = threading.Lock()
_executor_instance: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """Made on first use, so in the worker process after gunicorn's fork."""
    global _executor_instance
    with _executor_lock:
        if _executor_instance is None:
            _executor_instance = ThreadPoolExecutor(_VALIDATION_THREADS, thread_name_prefix="growler-validate")
        return _executor_instance


class BoundedJSONProvider(FlaskJSONProvider):
    """Flask's JSON with the same limits: what the handlers' ``request.get_json`` parses."""

    limits: Limits = Limits()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return load_json(s, self.limits)


def validator_map(limits: Limits | None = None) -> dict[str, Any]:
    bounded = type("BoundedBodyValidator", (NullMeansAbsentBodyValidator,), {"limits": limits or Limits()})
    body = MediaTypeDict({**VALIDATOR_MAP["body"], "*/*json": bounded})
    return {**VALIDATOR_MAP, "parameter": SimpleStyleHeaderValidator, "body": body}
