"""updateProperties' request body: the generated model (app/rules/contract/catalog.py), the keys
to remove as a tuple in the order sent and both parts empty when left out (scripts/models.py)."""

from __future__ import annotations

from app.rules.contract.catalog import UpdateNamespacePropertiesRequest

__all__ = ["UpdateNamespacePropertiesRequest"]
