"""Request bodies of the catalog API that need no behaviour of their own: the generated models of
``openapi/catalog.yaml`` (app/rules/contract/catalog.py), named here where the services import
them. renameView's body is renameTable's (the yaml's RenameTableRequest)."""

from __future__ import annotations

from app.rules.contract.catalog import CreateNamespaceRequest, RenameTableRequest, TableIdentifier

__all__ = ["CreateNamespaceRequest", "RenameTableRequest", "TableIdentifier"]
