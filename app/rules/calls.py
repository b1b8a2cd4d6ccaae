"""One operation's parameters as the authorization rows read them: pure, no I/O.

The dispatcher hands each operation's path and query values and its parsed body to its row
(app/authorization.py for the catalog, app/management/operations.py for the management API);
both read them through this one type.
"""

from __future__ import annotations

from typing import Any

from app.rules.identifiers import parse_namespace
from app.rules.privileges import Kind, Securable
from app.rules.requests.catalog import TableIdentifier


class Call:
    """One operation's parameters as the rows read them (path and query values, body)."""

    def __init__(self, params: dict[str, Any], body: Any, separator: str, default_warehouse: str) -> None:
        self.params = params
        self.body = body if body is not None else {}  # the handler's model ({}: the operation takes no body)
        self.separator = separator
        self.warehouse = str(params.get("prefix") or default_warehouse)

    def levels(self, name: str = "namespace") -> tuple[str, ...]:
        return parse_namespace(str(self.params[name]), self.separator)

    def namespace(self, name: str = "namespace") -> Securable:
        return Securable.of_namespace(self.warehouse, self.levels(name))

    def entry(self, kind: Kind, name: str) -> Securable:
        return Securable.of_entry(kind, self.warehouse, self.levels(), str(self.params[name]))

    def identified(self, kind: Kind, identifier: TableIdentifier) -> Securable:
        """A TableIdentifier of the (typed) body."""
        return Securable.of_entry(kind, self.warehouse, identifier.namespace, identifier.name)
