"""The typed request bodies: what a handler's ``body`` is parsed into at the edge, once.

A body reaches a model only after the yaml's schema has accepted it (``app.edge.operations``);
the model then gives the services typed values instead of ``dict[str, Any]``. The shapes are
generated from the yamls (app/rules/contract/, ``make models``, checked by
tests/unit/test_contract_models.py); this package names them for the services and adds only
behaviour: a model may define ``from_body`` for a parse of its own (an error message the
reference catalog words differently, parts parsed into PyIceberg's types); otherwise pydantic's
validation parses it. createTable's body stays PyIceberg's model, createView's and replaceView's
hold what the view rules parsed.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from app.ground.errors import BadRequest
from app.rules.describe import describe_error

Model = TypeVar("Model", bound=BaseModel)


def parse_request(model: type[Model], value: Any) -> Model:
    """``value`` (JSON the yaml accepted) as ``model``; BadRequest with the model's complaint."""
    from_body = getattr(model, "from_body", None)
    if from_body is not None:
        return from_body(value)
    try:
        return model.model_validate(value)
    except PydanticValidationError as exc:
        raise BadRequest(f"Invalid {model.__name__}: {describe_error(exc)}") from exc
