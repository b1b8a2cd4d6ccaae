"""Authorization: what each catalog operation needs, and whether the caller holds it.

``RULES`` is the one table of the rules, looked up by ``Authorizer.authorize`` for every
operation: for each operationId of the catalog (``OPERATIONS``), the privilege it needs on which
securable (``None``: only to see it); for each of the management API (``MANAGEMENT_OPERATIONS``),
the right its gate checks first (``Managed``, app/management/rights.py). ``Authorizer.authorize`` applies it before
the operation runs - the dispatcher (app/edge/dispatch.py) checks it once for every catalog
operation, on the event loop or in the handler's thread - so a refused request writes nothing.
What is missing is 403 ``ForbiddenException`` when the caller can see the securable's container
and the container's own 404 otherwise
(app/rules/privileges.py); either way one JSON audit line.

Decisions cost no database round trip for a caller seen before: each worker caches a
principal's grants, resolved to paths when loaded (one query: storage/grants.py), under the
``auth_state.version`` that the authentication state polls twice a second. Every change that
can alter a decision - a grant, a role, a membership, a drop that cascades to grants, a rename
of something granted - bumps that version by trigger (0011), so a revoke takes effect on every
worker and replica within a second. Without authentication (``GROWLER_AUTH=none``) there is no
caller and everything is allowed - but only through ``Authorizer.allow_all()``: an enforcing
authorizer asked to decide with no caller (``current_principal`` unset: a code path that forgot
to carry it) refuses with 401 ``NotAuthorizedException``, as an anonymous request is refused.
401 rather than 403 because what is missing is a caller, not a privilege: nobody was
authenticated, and no grant could make the call allowed. Nothing in the server decides without
a request: housekeeping, purges and scan-plan workers read and write storage directly, and the
commit writers run in a copy of the request's context.

Every service that decides takes its authorizer as a required constructor argument: there is
no permissive default to fall back on, so a service wired without one fails to build instead of
allowing everything. What legitimately runs with nothing to enforce (``GROWLER_AUTH=none``, the
operator's scripts, the benchmarks) says so where it builds its services, with
``Authorizer.allow_all()`` (tests/unit/test_layers.py holds both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.ground.audit_note import ALLOWED, REFUSED, note_decision
from app.ground.callers import IDP, Principal, current_principal
from app.ground.errors import (
    CatalogError,
    Forbidden,
    NoSuchFunction,
    NoSuchNamespace,
    NoSuchTable,
    NoSuchView,
    NoSuchWarehouse,
    NotAuthorized,
)
from app.ground.events import audit
from app.ground.lru import LruCache
from app.management.operations import MANAGEMENT_OPERATIONS, Managed, ManagementGate
from app.rules.calls import Call
from app.rules.identifiers import format_namespace
from app.rules.privileges import (
    ALLOW,
    FORBIDDEN,
    EffectiveGrants,
    Grant,
    Kind,
    Privilege,
    Securable,
    decide,
)
from app.rules.requests.tables import CommitTableRequest, CommitTransactionRequest, RegisterTableRequest
from app.rules.requests.views import RegisterViewRequest
from app.rules.restrictions.policies import ColumnRule, ReadPolicy, for_caller
from app.rules.restrictions.views import parse_referenced_by
from storage.grants import GrantRepository, Holdings
from storage.management_rows import GrantRow
from storage.view_definers import ViewDefiners

CACHE_ENTRIES = 10_000  # principals per worker
ALL = EffectiveGrants(admin=True)

READ, WRITE, CREATE, DROP = Privilege.READ, Privilege.WRITE, Privilege.CREATE, Privilege.DROP
SEE = None  # only to see the securable

Need = tuple[Privilege | None, Securable]


class AnyOf(tuple):
    """Needs of which one suffices (the first names the refusal when none is held)."""


Rule = list[Need | AnyOf]


def _created(call: Call) -> Securable:
    levels = call.body.namespace
    return Securable.of_namespace(call.warehouse, levels).container()


def _rename(kind: Kind) -> Callable[[Call], list[Need]]:
    def needs(call: Call) -> list[Need]:
        source = call.identified(kind, call.body.source)
        destination = call.identified(kind, call.body.destination).container()
        return [(DROP, source), (CREATE, destination)]

    return needs


def _commit(call: Call, table: Securable, commit: CommitTableRequest) -> Need:
    """A commit that creates its table (a staged create) needs CREATE, any other WRITE."""
    return (CREATE, table.container()) if commit.creates else (WRITE, table)


def _transaction(call: Call) -> list[Need]:
    request: CommitTransactionRequest = call.body
    return [_commit(call, call.identified(Kind.TABLE, change.identifier), change) for change in request.table_changes]


def _register(kind: Kind) -> Callable[[Call], list[Need]]:
    def needs(call: Call) -> list[Need]:
        body: RegisterTableRequest | RegisterViewRequest = call.body
        found: list[Need] = [(CREATE, call.namespace())]
        if body.overwrite:
            found.append((WRITE, Securable.of_entry(kind, call.warehouse, call.levels(), body.name)))
        return found

    return needs


def _table(privilege: Privilege | None) -> Callable[[Call], list[Need]]:
    return lambda call: [(privilege, call.entry(Kind.TABLE, "table"))]


def _view(privilege: Privilege | None) -> Callable[[Call], list[Need]]:
    return lambda call: [(privilege, call.entry(Kind.VIEW, "view"))]


def _namespace(privilege: Privilege | None) -> Callable[[Call], list[Need]]:
    return lambda call: [(privilege, call.namespace())]


def _table_or_stage(call: Call) -> Rule:
    """Storage access (signing, credentials) to a table, or to a staged one before its create
    commits: READ on the table, or CREATE on its namespace (what staging it needed). Which of
    the two the answer needs depends on whether the table has a row: ``TableStorageAccess.storage_scope``."""
    table = call.entry(Kind.TABLE, "table")
    return [AnyOf(((READ, table), (CREATE, table.container())))]


# Every operation of openapi/catalog.yaml that has a handler (a test checks the list is complete).
OPERATIONS: dict[str, Callable[[Call], Rule]] = {
    # How to talk to a warehouse: for a caller that sees it (any grant on it, above or below it).
    # Any other gets the warehouse-level 403 whether the warehouse exists or not: answering 200
    # for one that exists and 404 for one that does not told its existence to anyone.
    "getConfig": lambda call: [(SEE, Securable.of_warehouse(str(call.params.get("warehouse") or call.warehouse)))],
    "listNamespaces": lambda call: [
        (SEE, call.namespace("parent") if call.params.get("parent") else Securable.of_warehouse(call.warehouse))
    ],
    "createNamespace": lambda call: [(CREATE, _created(call))],
    "loadNamespaceMetadata": _namespace(SEE),
    "namespaceExists": _namespace(SEE),
    "dropNamespace": _namespace(DROP),
    "updateProperties": _namespace(Privilege.MANAGE_PROPERTIES),
    "listTables": _namespace(SEE),
    "createTable": _namespace(CREATE),
    "registerTable": _register(Kind.TABLE),
    "loadTable": _table(READ),
    "tableExists": _table(READ),
    "updateTable": lambda call: [_commit(call, call.entry(Kind.TABLE, "table"), call.body)],
    "dropTable": _table(DROP),
    "unregisterTable": _table(DROP),
    "renameTable": _rename(Kind.TABLE),
    "loadCredentials": _table_or_stage,
    "reportMetrics": _table(READ),
    "signRequest": _table_or_stage,
    "planTableScan": _table(READ),
    "fetchPlanningResult": _table(READ),
    "fetchScanTasks": _table(READ),
    "cancelPlanning": _table(READ),
    "commitTransaction": _transaction,
    "listViews": _namespace(SEE),
    "createView": _namespace(CREATE),
    "registerView": _register(Kind.VIEW),
    "loadView": _view(READ),
    "viewExists": _view(READ),
    "replaceView": _view(WRITE),
    "dropView": _view(DROP),
    "renameView": _rename(Kind.VIEW),
    "listFunctions": _namespace(SEE),
    "loadFunction": lambda call: [(READ, call.entry(Kind.FUNCTION, "function"))],
    # The change feed (openapi/events.yaml): for a caller that sees the warehouse; each event is
    # then shown only to a caller that may read its object (app/events/feed.py).
    "queryEvents": lambda call: [(SEE, Securable.of_warehouse(call.warehouse))],
}

# Every operation of both yamls has its row, looked up by the one ``Authorizer.authorize``.
RULES: dict[str, Callable[[Call], Rule] | Managed] = {**OPERATIONS, **MANAGEMENT_OPERATIONS}

# What a trusted engine may do for a table it loads through views (loadTable's referenced-by).
_THROUGH_VIEWS = frozenset({"loadTable", "loadCredentials"})

# The spec gives signRequest no 404: a table the caller may not see is refused like any other.
_NO_NOT_FOUND = frozenset({"signRequest"})

_MISSING: dict[Kind, type[CatalogError]] = {
    Kind.WAREHOUSE: NoSuchWarehouse,
    Kind.NAMESPACE: NoSuchNamespace,
    Kind.TABLE: NoSuchTable,
    Kind.VIEW: NoSuchView,
    Kind.FUNCTION: NoSuchFunction,
}


def _hidden(securable: Securable) -> CatalogError:
    """The 404 the operation gives for something that does not exist (the Java catalog's wording)."""
    path = securable.namespace + ((securable.name,) if securable.name is not None else ())
    if securable.kind is Kind.WAREHOUSE:  # never reached today (a warehouse is refused with 403)
        path = (securable.warehouse or "",)
    what = securable.kind.value.capitalize()
    return _MISSING[securable.kind](f"{what} does not exist: {format_namespace(path)}")


def _described(need: Need) -> str:
    """``read on table wh:a.t``: one need that held, as the audit trail's rule."""
    privilege, securable = need
    return f"{privilege.value if privilege is not None else 'see'} on {securable.describe()}"


def as_grant(row: GrantRow) -> Grant | None:
    """A stored grant (storage/grants.py) as the rules' grant; None for a privilege the rules do not know."""
    try:
        privilege = Privilege(row.privilege)
    except ValueError:
        return None
    on = row.securable
    return Grant(privilege, Securable(Kind(on.type), on.warehouse, tuple(on.namespace), on.name))


def effective(
    holdings_admin: bool,
    rows: list[GrantRow],
    restrictions: tuple[ReadPolicy, ...] = (),
    trusted_engine: bool = False,
) -> EffectiveGrants:
    """Stored grants as the grants decisions read (unknown privilege names are ignored)."""
    grants = [grant for grant in map(as_grant, rows) if grant is not None]
    return EffectiveGrants.build(grants, holdings_admin, restrictions, trusted_engine)


def _policies(principal: Principal, holdings: Holdings) -> tuple[ReadPolicy, ...]:
    """The principal's read restrictions with the caller put in (``${principal}``, ``${roles}``:
    the roles it holds in the catalog and, for an IdP's token, the roles its claim names)."""
    roles = (*holdings.roles, *principal.roles)
    policies = []
    for held in holdings.restrictions:
        securable = held.securable
        key = (securable.warehouse, tuple(securable.namespace), securable.name)
        columns = tuple(ColumnRule(rule["name"], rule["action"]) for rule in held.columns)
        policies.append(for_caller(key, held.row_filter, columns, principal.name, roles))
    return tuple(policies)


class Authorizer:
    def __init__(
        self,
        repository: GrantRepository | None,
        version: Callable[[], int | None] = lambda: None,
        *,
        namespace_separator: str = "%1F",
        default_warehouse: str = "",
        definers: ViewDefiners | None = None,
    ) -> None:
        self.repository = repository  # None: nothing is enforced (only through allow_all, below)
        self._version = version
        # views' definers, for a trusted engine reading a table through views (None: refused)
        self.definers = definers
        self.separator = namespace_separator
        self.default_warehouse = default_warehouse
        self._cache: LruCache[Principal, tuple[int, EffectiveGrants]] = LruCache(CACHE_ENTRIES)

    @classmethod
    def allow_all(cls) -> Authorizer:
        """An authorizer that allows everything: for what runs with nothing to enforce
        (``GROWLER_AUTH=none``, the operator's scripts, benchmarks), named so that the choice is
        visible where the services are built. Never a default (tests/unit/test_layers.py)."""
        return cls(None)

    # -- the caller's grants ------------------------------------------------------------------

    def cached(self) -> EffectiveGrants | None:
        """The caller's grants if deciding needs no database round trip now (the event loop may)."""
        if self.repository is None:
            return ALL
        principal = current_principal.get()
        if principal is None:
            return None  # nothing to decide on the loop: grants() refuses, wherever it runs
        version = self._version()
        found = self._cache.get(principal)
        if found is not None and version is not None and found[0] == version:
            return found[1]
        return None

    def grants(self) -> EffectiveGrants:
        """The caller's grants: from the cache, or one query (then cached under the version read first)."""
        found = self.cached()
        if found is not None:
            return found
        principal = current_principal.get()
        if principal is None:  # authentication is on (cached() answered otherwise): fail closed
            raise NotAuthorized("No authenticated caller")
        return self.grants_of(principal)

    def grants_of(self, principal: Principal) -> EffectiveGrants:
        """A principal's grants (the caller's, or a view's definer's), cached like the caller's."""
        if self.repository is None:
            return ALL
        version = self._version()
        found = self._cache.get(principal)
        if found is not None and version is not None and found[0] == version:
            return found[1]
        holdings = self.repository.holdings(
            principal.name, principal.roles if principal.source == IDP else (), own=principal.source != IDP
        )
        grants = effective(holdings.admin, holdings.grants, _policies(principal, holdings), holdings.trusted_engine)
        if version is not None:
            self._cache.put(principal, (version, grants))
        return grants

    # -- decisions ----------------------------------------------------------------------------

    def may(self, privilege: Privilege, securable: Securable) -> bool:
        return self.grants().holds(privilege, securable)

    def sees(self, securable: Securable) -> bool:
        return self.grants().sees(securable)

    def filter(
        self, items: list[Any], securable_of: Callable[[Any], Securable], privilege: Privilege | None = None
    ) -> list[Any]:
        """The listed items the caller may see (or holds ``privilege`` on)."""
        grants = self.grants()
        if grants.admin:
            return items
        if privilege is None:
            return [item for item in items if grants.sees(securable_of(item))]
        return [item for item in items if grants.holds(privilege, securable_of(item))]

    def authorize(
        self, operation_id: str, params: dict[str, Any], body: Any = None, gate: ManagementGate | None = None
    ) -> None:
        """Raise 403 (or the 404 that hides what the caller cannot see) unless the caller may run it;
        401 when there is no caller to decide for (enforcing: see the module's docstring). A
        management operation's row is checked by ``gate`` (without one, it is refused)."""
        if self.repository is None:  # allow_all(): nothing to enforce
            note_decision(ALLOWED, "authorization off")
            return
        rule = RULES.get(operation_id)
        if rule is None:
            raise Forbidden(f"Operation {operation_id} has no authorization rule")
        if isinstance(rule, Managed):
            if gate is None:
                raise Forbidden(f"Operation {operation_id} is decided by the management API's rights")
            rule.check(gate, Call(params, body, self.separator, self.default_warehouse))
            return
        grants = self.grants()
        if grants.admin:
            note_decision(ALLOWED, "administrator")
            return
        call = Call(params, body, self.separator, self.default_warehouse)
        held: list[Need] = []  # what allowed it, for the audit trail
        for need in rule(call):
            options: tuple[Need, ...] = need if isinstance(need, AnyOf) else (need,)
            outcomes = [decide(grants, privilege, securable) for privilege, securable in options]
            if ALLOW in outcomes:
                held.append(options[outcomes.index(ALLOW)])
                continue
            (privilege, securable), outcome = options[0], outcomes[0]
            if operation_id in _THROUGH_VIEWS and call.params.get("referencedby"):
                definer = self.read_through_views(str(call.params["referencedby"]), securable)
                note_decision(ALLOWED, f"read on {securable.describe()} through views, as {definer.name}")
                return
            forbidden = outcome == FORBIDDEN or operation_id in _NO_NOT_FOUND
            self._audit(operation_id, privilege, securable, 403 if forbidden else 404)
            needed = privilege.value if privilege is not None else "any privilege"
            note_decision(REFUSED, f"lacks {needed} on {securable.describe()}")
            if forbidden:
                raise Forbidden(f"Principal lacks {needed} on {securable.describe()} for {operation_id}")
            raise _hidden(securable)
        note_decision(ALLOWED, "; ".join(_described(need) for need in held) or "no privilege needed")

    def read_through_views(self, referenced_by: str, table: Securable) -> Principal:
        """A trusted engine loading ``table`` through the views of loadTable's ``referenced-by``
        (outermost first): the caller reads the first view, each view's definer reads the next,
        the last one's reads the table. The last definer (whose restrictions on the table apply
        with the caller's); 403 saying which hop failed otherwise.

        Only a trusted engine: the chain is the engine's word (the catalog cannot check that a
        view's SQL names the table), which a client could otherwise use to read anything a view's
        definer may. A view without a definer (one replaced just now, or undropped) passes nothing.
        """
        grants = self.grants()
        refused = f"Cannot read {table.describe()} through views"
        if not grants.trusted_engine:
            raise Forbidden(f"{refused}: only a trusted engine may (referenced-by); the caller is not one")
        if self.definers is None:
            raise Forbidden(f"{refused}: this catalog reads no table through views")
        warehouse = table.warehouse or ""
        views = parse_referenced_by(referenced_by, self.separator)
        hops = [Securable.of_entry(Kind.VIEW, warehouse, namespace, name) for namespace, name in views] + [table]
        if not grants.holds(READ, hops[0]):
            raise Forbidden(f"{refused}: principal lacks read on {hops[0].describe()}")
        definers = self.definers.of(warehouse, views)
        reader: Principal | None = None
        for view, following in zip(views, hops[1:], strict=True):
            definer = definers.get(view)
            if definer is None:
                raise Forbidden(f"{refused}: view {format_namespace((*view[0], view[1]))} has no definer")
            reader = Principal(definer.principal, definer.source, definer.roles)
            if not self.grants_of(reader).holds(READ, following):
                raise Forbidden(
                    f"{refused}: the definer of {format_namespace((*view[0], view[1]))} lacks read on"
                    f" {following.describe()}"
                )
        assert reader is not None
        return reader

    def _audit(self, operation_id: str, privilege: Privilege | None, securable: Securable, status: int) -> None:
        """The refusal as app/ground/events.py's one audit line (the caller's token never appears)."""
        principal = current_principal.get()
        target = {"securable": securable.describe(), "privilege": privilege.value if privilege is not None else None}
        audit(
            operation_id,
            principal.name if principal else None,
            target,
            "forbidden" if status == 403 else "hidden",
            status,
        )
