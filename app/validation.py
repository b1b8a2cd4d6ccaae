"""Request validation tweaks on top of connexion's defaults."""

from __future__ import annotations

from typing import Any

from connexion.validators import VALIDATOR_MAP, ParameterValidator


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


def validator_map() -> dict[str, Any]:
    return {**VALIDATOR_MAP, "parameter": SimpleStyleHeaderValidator}
