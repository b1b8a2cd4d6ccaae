"""What the generated contract models (app/rules/contract/) stand on: their base class and the
types the generator's overrides name (scripts/models.py).

Where a yaml's schema is awkward as pydantic would generate it, the overrides use these instead:
arrays the services compare or hash (a namespace's levels, a filter's list) are tuples, and an
absent list is empty rather than None (``validate_default`` turns the yaml-side ``[]`` default
into the tuple the annotation says).
"""

from __future__ import annotations

from pydantic import ConfigDict
from pyiceberg.typedef import IcebergBaseModel

NamespaceLevels = tuple[str, ...]
"""A namespace's levels (the yaml's Namespace, and CatalogObjectIdentifier)."""

Strings = tuple[str, ...]
"""A list of strings the services only read (keys to remove, a filter's values)."""

NamespacePaths = tuple[tuple[str, ...], ...]
"""A list of identifiers (the change feed's catalog-objects-by-name)."""


class ContractModel(IcebergBaseModel):
    """The generated models' base: PyIceberg's (by alias, frozen, None left out of a dump), with
    defaults validated so that an overridden default takes its field's type."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, validate_default=True)
