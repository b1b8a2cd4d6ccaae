"""Request bodies of the catalog API that PyIceberg has no model for, from ``openapi/catalog.yaml``."""

from __future__ import annotations

from pydantic import Field
from pyiceberg.typedef import IcebergBaseModel


class TableIdentifier(IcebergBaseModel):
    """The spec's TableIdentifier: a namespace's levels and a name (checked by the services)."""

    namespace: tuple[str, ...]
    name: str


class CreateNamespaceRequest(IcebergBaseModel):
    namespace: tuple[str, ...]
    properties: dict[str, str] = Field(default_factory=dict)


class RenameTableRequest(IcebergBaseModel):
    """renameTable's and renameView's body."""

    source: TableIdentifier
    destination: TableIdentifier
