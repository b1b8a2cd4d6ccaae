"""What the generated contract models (app/rules/contract/) stand on: their base class and the
types the generator's overrides name (scripts/models.py).

Where a yaml's schema is awkward as pydantic would generate it, the overrides use these instead:
arrays the services compare or hash (a namespace's levels, a filter's list) are tuples, and an
absent list is empty rather than None (``validate_default`` turns the yaml-side ``[]`` default
into the tuple the annotation says).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict
from pyiceberg.table.update import TableRequirement
from pyiceberg.typedef import IcebergBaseModel

from app.rules.table.models import TableUpdate

NamespaceLevels = tuple[str, ...]
"""A namespace's levels (the yaml's Namespace, and CatalogObjectIdentifier)."""

Strings = tuple[str, ...]
"""A list of strings the services only read (keys to remove, a filter's values)."""

NamespacePaths = tuple[tuple[str, ...], ...]
"""A list of identifiers (the change feed's catalog-objects-by-name)."""

Json = Any
"""A value kept as the JSON sent (a scan's filter, which the rules bind to the scanned schema)."""

TableRequirements = list[TableRequirement]
"""A commit's requirements, as PyIceberg's models."""

TableUpdates = list[TableUpdate]
"""A commit's updates, as the rules' widened union of PyIceberg's (app/rules/table/models.py)."""


class ContractModel(IcebergBaseModel):
    """The generated models' base: PyIceberg's (by alias, frozen, None left out of a dump), with
    defaults validated so that an overridden default takes its field's type."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, validate_default=True)
