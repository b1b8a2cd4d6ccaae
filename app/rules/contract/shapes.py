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

Text = str
"""A string the yaml names as a schema of its own (a plan task, a field name, a policy type): plain
here, where pydantic would make a root model the services would have to unwrap."""

Headers = dict[str, list[str]]
"""An HTTP request's headers, each with its values (the yaml's MultiValuedMap)."""

JsonObject = dict[str, Any]
"""An open JSON object (a maintenance policy's content, which app/rules/maintenance.py checks)."""

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


class SecurableShape(ContractModel):
    """The base of the management yaml's Securable (scripts/models.py's base class map): a
    securable named by its parts. Which parts each type needs is the service's to check
    (app/management/service.py ``parse_securable``, app/protection/service.py)."""

    def view(self) -> dict[str, Any]:
        """As the request named it (audit lines, change events): the parts given, JSON values."""
        return self.model_dump(mode="json")


class UpdateShape(ContractModel):
    """The base of the management yaml's update requests (scripts/models.py's base class map): a
    field the client left out stays unset, and an update changes only what it names."""

    def given(self) -> list[str]:
        """The fields the request names (the yaml's keys), sorted: what an update changes."""
        return sorted(self.model_dump(exclude_unset=True))
