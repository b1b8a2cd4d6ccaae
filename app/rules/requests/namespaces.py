"""updateProperties' request body, from ``openapi/catalog.yaml`` (PyIceberg has a model for
the response only)."""

from __future__ import annotations

from pydantic import Field
from pyiceberg.typedef import IcebergBaseModel


class UpdateNamespacePropertiesRequest(IcebergBaseModel):
    """The keys to remove (unique, the yaml says; in the order sent) and the properties to set."""

    removals: tuple[str, ...] = ()
    updates: dict[str, str] = Field(default_factory=dict)
