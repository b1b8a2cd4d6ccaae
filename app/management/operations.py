"""The management API's rows of the one authorization table (openapi/management.yaml).

``Authorizer.authorize`` (app/authorization.py) looks every operation up in ``RULES``: the
catalog's ``OPERATIONS`` and these. A management operation's rights are not one privilege on
one securable (administrators, holders of manage-grants anywhere, the roles a caller could give
every grant of: app/management/rights.py), so each row is a ``Managed`` check that the
management API's gate runs before the handler, from the request alone. Where the exact
securable is known only once a stored unit or the parsed body is read (an undrop's unit, a
mark's or a policy's securable, a grant's privilege), the row checks what the request already
proves (the right somewhere in that warehouse, or anywhere) and the service checks the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.rules.calls import Call
from app.rules.identifiers import parse_namespace
from app.rules.privileges import Kind, Privilege, Securable
from app.rules.requests.management import CreatePrincipalRequest, GrantRequest


class ManagementGate(Protocol):
    """The management API's rights (app/management/rights.py): each check refuses with 403 (and
    one audit line) or answers the caller's name."""

    def require_admin(self, action: str, target: dict[str, Any], what: str) -> str | None: ...
    def require_grant_manager(self, action: str, target: dict[str, Any]) -> str | None: ...
    def require_principal_directory(self, action: str, target: dict[str, Any]) -> str | None: ...
    def require_principal_maker(self, action: str, target: dict[str, Any], admin: bool) -> str | None: ...
    def require_self_or_admin(self, action: str, target: dict[str, Any], name: str) -> str | None: ...
    def require_warehouse_reader(self, action: str, target: dict[str, Any]) -> str | None: ...
    def require_role_manager(self, action: str, target: dict[str, Any], role: str) -> str | None: ...
    def require_privilege(
        self, action: str, target: dict[str, Any], privilege: Privilege, on: Securable
    ) -> str | None: ...
    def require_within(
        self, action: str, target: dict[str, Any], privilege: Privilege, on: Securable
    ) -> str | None: ...
    def require_reader_of(self, action: str, target: dict[str, Any], on: Securable) -> str | None: ...
    def require_unrestricted_within(
        self, action: str, target: dict[str, Any], on: Securable, refusal: str
    ) -> str | None: ...


@dataclass(frozen=True)
class Managed:
    """A management operation's row: the right it needs, checked by the management API's gate
    (its rules are not privileges on one securable: administrators, holders of manage-grants
    anywhere, the roles a caller could give every grant of; app/management/rights.py). A check
    that needs the body parsed first (which privilege on which securable a grant names) follows
    in the service, after this one."""

    check: Callable[[ManagementGate, Call], object]


def _principal_target(call: Call) -> dict[str, Any]:
    return {"principal": call.params.get("principal")}


def _role_target(call: Call) -> dict[str, Any]:
    target = {"role": call.params.get("role")}
    return {**target, "principal": call.params["principal"]} if "principal" in call.params else target


def _maker(gate: ManagementGate, call: Call) -> object:
    body: CreatePrincipalRequest = call.body
    return gate.require_principal_maker("create-principal", {"principal": body.name, "admin": body.admin}, body.admin)


def _grant_target(call: Call) -> dict[str, Any]:
    body: GrantRequest = call.body
    return {"role": call.params.get("role"), "privilege": body.privilege.value, "securable": body.securable.view()}


def _queried_securable(call: Call) -> dict[str, Any]:
    """listGrantsOnSecurable's securable, from its query, as the handler hands it to the service."""
    namespace = call.params.get("namespace")
    return {
        "type": call.params.get("type"),
        "warehouse": call.params.get("warehouse"),
        "name": call.params.get("name"),
        "namespace": list(parse_namespace(str(namespace), call.separator)) if namespace is not None else None,
    }


def _warehouse_admin(action: str, named: Callable[[Call], str] = lambda call: call.params["warehouse"]) -> Managed:
    """An administrator's: ``named`` says which warehouse (the path's; a new one's is its body's)."""

    def check(gate: ManagementGate, call: Call) -> object:
        return gate.require_admin(action, {"warehouse": named(call)}, "manage warehouses")

    return Managed(check)


# -- the recycle bin, protection, event sinks and maintenance (added with issues 35-37) ----------


def _bin_target(call: Call) -> dict[str, Any]:
    namespace = call.params.get("namespace")
    levels = list(call.levels()) if namespace is not None else None
    return {"warehouse": call.params.get("warehouse"), "namespace": levels}


def _list_bin(gate: ManagementGate, call: Call) -> object:
    """``undrop`` where the listing looks: the namespace asked for, or the warehouse."""
    warehouse = str(call.params.get("warehouse"))
    where = (
        Securable.of_namespace(warehouse, call.levels())
        if call.params.get("namespace")
        else Securable.of_warehouse(warehouse)
    )
    return gate.require_privilege("list-bin", _bin_target(call), Privilege.UNDROP, where)


def _undrop(gate: ManagementGate, call: Call) -> object:
    """``undrop`` somewhere in the warehouse; the service then checks it where the unit was
    (and where it comes back), once the unit is read."""
    warehouse = str(call.params.get("warehouse"))
    target = {"warehouse": warehouse, "id": call.params.get("unit")}
    return gate.require_within("undrop", target, (Privilege.UNDROP,), Securable.of_warehouse(warehouse))


def _moves(action: str) -> Managed:
    """Drop somewhere in the federated warehouse; the service checks the table and the target."""

    def check(gate: ManagementGate, call: Call) -> object:
        warehouse = str(call.params.get("warehouse"))
        target = {"warehouse": warehouse, "namespace": list(call.body.namespace)}
        if getattr(call.body, "name", None) is not None:  # a table's move (a namespace's has none)
            target["name"] = call.body.name
        return gate.require_within(action, target, (Privilege.DROP,), Securable.of_warehouse(warehouse))

    return Managed(check)


def _drop_recursive(gate: ManagementGate, call: Call) -> object:
    warehouse = str(call.params.get("warehouse"))
    target = {
        **_bin_target(call),
        "recursive": call.params.get("recursive"),
        "purge": bool(call.params.get("purgeRequested")),
    }
    on = Securable.of_namespace(warehouse, call.levels())
    return gate.require_privilege("drop-namespace", target, Privilege.DROP, on)


def _mark(action: str) -> Managed:
    """``manage-grants`` somewhere in the warehouse; the service checks it on the securable the
    body names once it is parsed."""

    def check(gate: ManagementGate, call: Call) -> object:
        warehouse, mark = str(call.params.get("warehouse")), call.body
        namespace = list(mark.namespace) if mark.namespace is not None else None
        target = {"warehouse": warehouse, "type": mark.type.value, "namespace": namespace, "name": mark.name}
        return gate.require_within(action, target, (Privilege.MANAGE_GRANTS,), Securable.of_warehouse(warehouse))

    return Managed(check)


def _restriction(action: str) -> Managed:
    """``manage-grants`` somewhere in the warehouse; the service checks it on the securable the
    body names once it is parsed (as for a protection mark)."""

    def check(gate: ManagementGate, call: Call) -> object:
        warehouse, securable = str(call.params.get("warehouse")), call.body.securable
        namespace = [getattr(level, "root", level) for level in securable.namespace or ()] or None
        target = {"warehouse": warehouse, "type": securable.type, "namespace": namespace, "name": securable.name}
        return gate.require_within(action, target, (Privilege.MANAGE_GRANTS,), Securable.of_warehouse(warehouse))

    return Managed(check)


def _sinks(action: str, what: Callable[[Call], dict[str, Any]] = lambda call: {}) -> Managed:
    return Managed(lambda gate, call: gate.require_admin(action, what(call), "manage event sinks"))


def _sink(call: Call) -> dict[str, Any]:
    return {"sink": call.params.get("sink")}


def _policies(action: str, privilege: Privilege) -> Managed:
    """The privilege somewhere (a policy may sit on the catalog); the service checks it on the
    securable the body or the query names once it is parsed."""

    def check(gate: ManagementGate, call: Call) -> object:
        securable = call.body.securable.view()
        return gate.require_within(action, {"securable": securable}, (privilege,), Securable.catalog())

    return Managed(check)


def _policies_reader(gate: ManagementGate, call: Call) -> object:
    """Reading the policies attached somewhere: manage-maintenance or read anywhere first (the
    service checks the securable once its parts are parsed)."""
    target = {"securable": {k: call.params.get(k) for k in ("type", "warehouse", "name")}}
    readers = (Privilege.MANAGE_MAINTENANCE, Privilege.READ)
    return gate.require_within("list-maintenance-policies", target, readers, Securable.catalog())


def _maintained_table(call: Call) -> Securable:
    warehouse = str(call.params.get("warehouse"))
    return Securable.of_entry(Kind.TABLE, warehouse, call.levels(), str(call.params.get("table")))


def _table_view(on: Securable) -> dict[str, Any]:
    return {"securable": {"type": "table", "warehouse": on.warehouse, "namespace": list(on.namespace), "name": on.name}}


def _table_reader(action: str) -> Managed:
    def check(gate: ManagementGate, call: Call) -> object:
        on = _maintained_table(call)
        return gate.require_reader_of(action, _table_view(on), on)

    return Managed(check)


def _table_data_reader(action: str, what: str) -> Managed:
    """A table reader's right, for an answer that names the table's partitions (their values are
    its rows' data): refused to a caller with read restrictions on the table, which they may not
    keep (docs/read-restrictions.md)."""

    def check(gate: ManagementGate, call: Call) -> object:
        on = _maintained_table(call)
        gate.require_reader_of(action, _table_view(on), on)
        refusal = (
            f"Cannot read {what} of {on.describe()}: it names the table's partitions, whose values the"
            " principal's read restrictions on the table may keep from it; a principal without restrictions"
            " there may"
        )
        return gate.require_unrestricted_within(action, _table_view(on), on, refusal)

    return Managed(check)


def _run_maintenance(gate: ManagementGate, call: Call) -> object:
    on = _maintained_table(call)
    return gate.require_privilege("run-maintenance", _table_view(on), Privilege.MANAGE_MAINTENANCE, on)


def _cancel_maintenance(gate: ManagementGate, call: Call) -> object:
    """Cancelling a run takes what starting one takes: manage-maintenance on the table."""
    on = _maintained_table(call)
    return gate.require_privilege("cancel-maintenance-run", _table_view(on), Privilege.MANAGE_MAINTENANCE, on)


def _report_maintenance(gate: ManagementGate, call: Call) -> object:
    """A Spark job's report of its run: its principal writes the table (it commits the rewrite);
    the run's report token, checked by the service, binds the report to the job Growler started."""
    on = _maintained_table(call)
    return gate.require_privilege("report-maintenance-run", _table_view(on), Privilege.WRITE, on)


# The management API's operations (openapi/management.yaml): the first check of each.
MANAGEMENT_OPERATIONS: dict[str, Managed] = {
    "listPrincipals": Managed(lambda gate, call: gate.require_principal_directory("list-principals", {})),
    "createPrincipal": Managed(_maker),
    "getPrincipal": Managed(
        lambda gate, call: gate.require_principal_directory("get-principal", _principal_target(call))
    ),
    "deletePrincipal": Managed(
        lambda gate, call: gate.require_admin("delete-principal", _principal_target(call), "delete principals")
    ),
    "rotatePrincipalSecret": Managed(
        lambda gate, call: gate.require_self_or_admin(
            "rotate-principal", _principal_target(call), str(call.params.get("principal"))
        )
    ),
    "listRoles": Managed(lambda gate, call: gate.require_grant_manager("list-roles", {})),
    "createRole": Managed(lambda gate, call: gate.require_grant_manager("create-role", {"role": call.body.name})),
    "getRole": Managed(lambda gate, call: gate.require_grant_manager("get-role", _role_target(call))),
    "deleteRole": Managed(
        lambda gate, call: gate.require_role_manager("delete-role", _role_target(call), str(call.params["role"]))
    ),
    "listRoleMembers": Managed(
        lambda gate, call: gate.require_role_manager("list-role-members", _role_target(call), str(call.params["role"]))
    ),
    "assignRole": Managed(
        lambda gate, call: gate.require_role_manager("assign-role", _role_target(call), str(call.params["role"]))
    ),
    "revokeRole": Managed(
        lambda gate, call: gate.require_role_manager("revoke-role", _role_target(call), str(call.params["role"]))
    ),
    "listGrantsForRole": Managed(
        lambda gate, call: gate.require_role_manager("list-grants", _role_target(call), str(call.params["role"]))
    ),
    "grantPrivilege": Managed(lambda gate, call: gate.require_grant_manager("grant", _grant_target(call))),
    "revokePrivilege": Managed(lambda gate, call: gate.require_grant_manager("revoke", _grant_target(call))),
    "listGrantsOnSecurable": Managed(
        lambda gate, call: gate.require_grant_manager("list-grants", {"securable": _queried_securable(call)})
    ),
    "listWarehouses": Managed(lambda gate, call: gate.require_warehouse_reader("list-warehouses", {})),
    "createWarehouse": _warehouse_admin("create-warehouse", lambda call: call.body.name),
    "getWarehouse": Managed(
        lambda gate, call: gate.require_warehouse_reader("get-warehouse", {"warehouse": call.params.get("warehouse")})
    ),
    "updateWarehouse": _warehouse_admin("update-warehouse"),
    "deleteWarehouse": _warehouse_admin("delete-warehouse"),
    # the recycle bin and protection (app/recycle_bin/service.py, app/protection/service.py)
    "listBin": Managed(_list_bin),
    "undropBinUnit": Managed(_undrop),
    "purgeBinUnit": Managed(
        lambda gate, call: gate.require_admin(
            "purge-bin",
            {"warehouse": call.params.get("warehouse"), "id": call.params.get("unit")},
            "purge the recycle bin",
        )
    ),
    "dropNamespaceRecursive": Managed(_drop_recursive),
    "listProtections": Managed(
        lambda gate, call: gate.require_privilege(
            "list-protections",
            {"warehouse": call.params.get("warehouse")},
            Privilege.MANAGE_GRANTS,
            Securable.of_warehouse(str(call.params.get("warehouse"))),
        )
    ),
    "protectSecurable": _mark("protect"),
    "unprotectSecurable": _mark("unprotect"),
    # read restrictions (app/restrictions/service.py): as grants, manage-grants where they go
    "listReadRestrictions": Managed(
        lambda gate, call: gate.require_privilege(
            "list-read-restrictions",
            {"warehouse": call.params.get("warehouse")},
            Privilege.MANAGE_GRANTS,
            Securable.of_warehouse(str(call.params.get("warehouse"))),
        )
    ),
    "setReadRestriction": _restriction("set-read-restriction"),
    "removeReadRestriction": _restriction("remove-read-restriction"),
    "setPrincipalTrustedEngine": Managed(
        lambda gate, call: gate.require_admin("set-trusted-engine", _principal_target(call), "mark trusted engines")
    ),
    "setRoleTrustedEngine": Managed(
        lambda gate, call: gate.require_admin("set-trusted-engine", _role_target(call), "mark trusted engines")
    ),
    # moving tables home (app/table_moves/service.py): drop in the federated warehouse, the
    # service then checks the source table and the target namespace once the body is read
    "listTableMoves": Managed(
        lambda gate, call: gate.require_privilege(
            "list-table-moves",
            {"warehouse": call.params.get("warehouse")},
            Privilege.DROP,
            Securable.of_warehouse(str(call.params.get("warehouse"))),
        )
    ),
    "moveTableHome": _moves("move-table-home"),
    "moveNamespaceHome": _moves("move-namespace-home"),
    "undoTableMove": _moves("undo-table-move"),
    # the change feed's push sinks (app/event_sinks/service.py): administrators'
    "listEventSinks": _sinks("list-event-sinks"),
    "createEventSink": _sinks("create-event-sink", lambda call: {"sink": call.body.name, "kind": call.body.kind}),
    "deleteEventSink": _sinks("delete-event-sink", _sink),
    "listDeadLetters": _sinks("list-dead-letters", _sink),
    "replayDeadLetters": _sinks("replay-dead-letters", _sink),
    # maintenance (app/maintenance/service.py)
    "listMaintenancePolicies": Managed(_policies_reader),
    "attachMaintenancePolicy": _policies("attach-maintenance-policy", Privilege.MANAGE_MAINTENANCE),
    "detachMaintenancePolicy": _policies("detach-maintenance-policy", Privilege.MANAGE_MAINTENANCE),
    "getEffectiveMaintenancePolicies": _table_reader("get-effective-maintenance-policies"),
    "listMaintenanceRuns": _table_data_reader("list-maintenance-runs", "the maintenance runs"),
    "runMaintenance": Managed(_run_maintenance),
    "getMaintenanceRun": _table_data_reader("get-maintenance-run", "a maintenance run"),
    "cancelMaintenanceRun": Managed(_cancel_maintenance),
    "reportMaintenanceRun": Managed(_report_maintenance),
    "getTableHealth": _table_data_reader("get-table-health", "the health"),
    # the audit trail (app/audit/service.py): administrators only, as warehouses and sinks
    "listAuditRecords": Managed(
        lambda gate, call: gate.require_admin("list-audit-records", {}, "read the audit trail")
    ),
}
