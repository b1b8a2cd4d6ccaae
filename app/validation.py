"""Request validation tweaks on top of connexion's defaults."""

from __future__ import annotations

import threading
from typing import Any

from connexion.datastructures import MediaTypeDict
from connexion.json_schema import Draft4RequestValidator
from connexion.utils import is_null, is_nullable
from connexion.validators import VALIDATOR_MAP, JSONRequestBodyValidator, ParameterValidator
from jsonschema import Draft4Validator, ValidationError


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


_PARAMETER_VALIDATORS = _ValidatorCache(Draft4Validator)
_BODY_VALIDATORS = _ValidatorCache(Draft4RequestValidator)


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
                return str(exception)
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
    """

    @property
    def _validator(self) -> Any:
        return _BODY_VALIDATORS.get(self._schema)

    def _validate(self, body: Any) -> dict | None:
        if isinstance(body, dict) and isinstance(self._schema, dict):
            required = set(self._schema.get("required", []))
            body = {key: value for key, value in body.items() if value is not None or key in required}
        return super()._validate(body)


def validator_map() -> dict[str, Any]:
    body = MediaTypeDict({**VALIDATOR_MAP["body"], "*/*json": NullMeansAbsentBodyValidator})
    return {**VALIDATOR_MAP, "parameter": SimpleStyleHeaderValidator, "body": body}
