"""Read restrictions on a federated warehouse's tables (issue 51, docs/read-restrictions.md
"Federated warehouses"): attached by path (migration 0038) and read with the caller's cached
grants like a native table's; the remote knows nothing of them, so Growler applies them to what it
forwards, before the remote is asked:

- loadTable: a trusted engine gets the remote's answer with the spec's ``read-restrictions``,
  bound to the table's schema as the remote answered it (fail closed: a filter that does not
  bind keeps no row); anyone else restricted gets 403 and nothing of the table (no metadata, no
  storage access). The answer is the caller's: no validator is passed either way (a 304 is never
  given for another caller's restrictions).
- loadCredentials: 403 unless a trusted engine, as for a native table.
- scan planning: refused to a restricted caller (403) - the remote plans without the restrictions,
  and Growler cannot make it apply them.
- drop and rename through Growler: refused to a restricted caller (403), as a native drop is - a
  restriction names the table by path, so the table under another name would be unrestricted.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from app.authorization import Authorizer
from app.federation.changes import Namespace, identified
from app.federation.remote import Answer
from app.ground.callers import current_principal
from app.ground.errors import BadGateway, Forbidden
from app.rules import table as table_rules
from app.rules.identifiers import format_namespace, parse_namespace
from app.rules.privileges import Kind, Securable
from app.rules.restrictions.policies import Restrictions, spec_restrictions, untrusted_message

PLANNING = frozenset({"planTableScan", "fetchPlanningResult", "fetchScanTasks"})
_BY_PATH = frozenset({"loadTable", "loadCredentials", "dropTable", *PLANNING})


def read_table(operation_id: str, values: dict[str, str], request: Any, separator: str) -> tuple[Namespace, str] | None:
    """The table whose reads an operation serves or whose name it takes away, if any."""
    if operation_id in _BY_PATH and "table" in values:
        return parse_namespace(values["namespace"], separator), values["table"]
    if operation_id == "renameTable":
        return identified(request.get("source") if isinstance(request, dict) else None)
    return None


class RemoteRestrictions:
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer  # the caller's cached grants, restrictions and trust

    def before(
        self, prefix: str, operation_id: str, values: dict[str, str], request: Any, separator: str
    ) -> Restrictions | None:
        """The caller's restrictions on the table the operation reads (None: none, go on);
        403 where the operation would read or unname it past them."""
        table = read_table(operation_id, values, request, separator)
        if table is None:
            return None
        grants = self.authorizer.grants()
        restrictions = grants.restrictions_on(Securable.of_entry(Kind.TABLE, prefix, *table))
        if restrictions is None:
            return None
        shown = f"{prefix}:{format_namespace((*table[0], table[1]))}"
        caller = current_principal.get()
        who = caller.name if caller else None
        if operation_id in ("dropTable", "renameTable"):
            raise Forbidden(
                f"Cannot {operation_id.removesuffix('Table')} table {shown}: principal {who or ''} reads it under read"
                " restrictions, which name it by its path in this federated warehouse; a principal without"
                " restrictions on it (a grant manager) may"
            )
        if operation_id in PLANNING:
            raise Forbidden(
                f"Table {shown} has read restrictions for principal {who or ''}: its federated warehouse's remote"
                " plans scans without them, so Growler does not forward scan planning for it; read it through a"
                " trusted engine, which applies the restrictions loadTable gives it"
            )
        if not grants.trusted_engine:
            raise Forbidden(untrusted_message(shown, who))
        return restrictions

    @staticmethod
    def unvalidated(headers: dict[bytes, list[bytes]]) -> dict[bytes, list[bytes]]:
        """A restricted caller's request without its validator: its answer is its own."""
        return {name: value for name, value in headers.items() if name != b"if-none-match"}

    @staticmethod
    def applied(restrictions: Restrictions, answer: Answer) -> Answer:
        """loadTable's answer with the caller's ``read-restrictions``, bound to the remote's schema;
        502 when that schema cannot be read (never an answer without them)."""
        if answer.status != 200 or not isinstance(answer.data, dict):
            return answer
        try:
            schema = table_rules.parse_metadata(json.dumps(answer.data["metadata"])).schema()
        except Exception as exc:  # noqa: BLE001 - whatever the remote sent, the restrictions cannot be bound
            raise BadGateway(
                "The remote catalog answered loadTable with metadata whose schema Growler cannot read, so the"
                " caller's read restrictions cannot be applied"
            ) from exc
        data = {**answer.data, "read-restrictions": spec_restrictions(restrictions, schema)}
        headers = {name: value for name, value in answer.headers.items() if name.lower() != "etag"}
        return replace(answer, data=data, body=json.dumps(data, separators=(",", ":")).encode(), headers=headers)
