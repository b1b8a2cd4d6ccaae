"""The typed request bodies: what a handler's ``body`` is parsed into at the edge, once.

A body reaches a model only after the yaml's schema has accepted it (``app.edge.operations``);
the model then gives the services typed values instead of ``dict[str, Any]``. PyIceberg's
request models are used where PyIceberg has them; the others are declared in this package from
the yamls' schemas. A model may define ``from_body`` for a parse of its own (an error message
the reference catalog words differently, a field the spec lets clients leave out that PyIceberg
requires); otherwise pydantic's validation parses it.
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
