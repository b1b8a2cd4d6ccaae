"""Request validation tweaks on top of connexion's defaults."""

from __future__ import annotations

from typing import Any

from connexion.datastructures import MediaTypeDict
from connexion.validators import VALIDATOR_MAP, JSONRequestBodyValidator, ParameterValidator


class SimpleStyleHeaderValidator(ParameterValidator):
    """Validates array-typed headers as the ``simple`` style the spec declares.

    connexion 3.3 validates the raw header string against ``type: array``, so
    ``X-Iceberg-Access-Delegation: vended-credentials`` - sent by PyIceberg on every request -
    would be refused. Split it on commas first, as the style says.
    """

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

    def _validate(self, body: Any) -> dict | None:
        if isinstance(body, dict) and isinstance(self._schema, dict):
            required = set(self._schema.get("required", []))
            body = {key: value for key, value in body.items() if value is not None or key in required}
        return super()._validate(body)


def validator_map() -> dict[str, Any]:
    body = MediaTypeDict({**VALIDATOR_MAP["body"], "*/*json": NullMeansAbsentBodyValidator})
    return {**VALIDATOR_MAP, "parameter": SimpleStyleHeaderValidator, "body": body}
