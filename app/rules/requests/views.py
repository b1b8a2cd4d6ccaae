"""The view operations' request bodies (createView, registerView, replaceView).

PyIceberg 0.12's ``CreateViewRequest`` and ``RegisterViewRequest`` are not used: the first
requires ``location`` (optional in the spec), takes a version without ``timestamp-ms`` by reading
the wall clock and refuses a non-SQL representation with pydantic's wording rather than Java's;
the second has no ``overwrite`` (a Growler extension, as for registerTable). The view rules
(``app.rules.view``) parse the parts with the messages the reference catalog gives, so each
model's ``from_body`` calls them: a body is parsed once, here, and the services receive what the
rules apply. Only registerView's body keeps the generated shape (app/rules/contract/catalog.py):
createView's and replaceView's hold what the rules parsed, not the JSON the yaml describes."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict
from pyiceberg.typedef import IcebergBaseModel

from app.rules import view as rules
from app.rules.contract import catalog as contract


class CreateViewRequest(IcebergBaseModel):
    """createView: the name (checked by the service, as for tables), the requested location
    (None: the namespace's), and the validated definition."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    location: str | None = None
    definition: rules.ViewDefinition

    @classmethod
    def from_body(cls, value: dict[str, Any]) -> CreateViewRequest:
        return cls(name=value["name"], location=value.get("location"), definition=rules.parse_definition(value))


class RegisterViewRequest(contract.RegisterViewRequest):
    """registerView (the generated shape); ``overwrite`` only when the body says ``true`` (the
    spec's RegisterViewRequest has no such field, so the yaml lets any value through: anything
    else registers anew). A Growler extension, as for registerTable: declared here, not generated."""

    overwrite: bool = False

    @classmethod
    def from_body(cls, value: dict[str, Any]) -> RegisterViewRequest:
        return cls(
            name=value["name"], metadata_location=value["metadata-location"], overwrite=value.get("overwrite") is True
        )


class CommitViewRequest(IcebergBaseModel):
    """replaceView: its requirements and updates, parsed (updates first: a malformed update is
    400 before a malformed requirement, as it was when the rules parsed them). The spec's
    optional ``identifier`` is not kept: the path names the view."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    requirements: tuple[rules.ViewChange, ...] = ()
    updates: tuple[rules.ViewChange, ...] = ()

    @classmethod
    def from_body(cls, value: dict[str, Any]) -> CommitViewRequest:
        updates = rules.parse_updates(value.get("updates"))
        requirements = rules.parse_requirements(value.get("requirements"))
        return cls(requirements=requirements, updates=updates)
