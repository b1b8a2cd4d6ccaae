"""The management API's rules: principals, roles, members, grants and warehouses.

Handlers (handlers/management.py) call one method here. The dispatcher has already checked the
operation's row of ``MANAGEMENT_OPERATIONS`` (app/management/operations.py), which calls one ``require_*`` of
app/management/rights.py (who may do what: least privilege, decided before anything is read or
written); a grant's and a listing's second check, on the securable the request names, follows
here once it is parsed. Principals, roles and who holds them are a part of their own
(``Identities``, app/management/identities.py) whose methods this service hands out as its own, so
``services.management`` is the one way in and each method is defined in one module. Every change
writes one audit line (``app.ground.events.audit``: who, what, which object; never a secret). SQL
lives in ``storage/management_rows.py`` (with the warehouses' in ``storage/warehouses.py``) and
``storage/principals.py``; each change there bumps ``auth_state.version``, which makes every worker
drop its cached warehouses and decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlparse

from app.catalog.paging import Page, PageWindow
from app.events.changes import management_events
from app.federation.settings import federation_settings, federation_view, updated_federation
from app.ground.errors import AlreadyExists, BadRequest, CatalogError, NoSuchWarehouse, NotFound, Protected
from app.ground.events import audit
from app.ground.locations import InvalidLocation, Location
from app.ground.page_tokens import PageTokens, scope
from app.ground.secrets import SecretBox
from app.ground.settings import RESERVED_PREFIXES, WAREHOUSE_NAME, Settings, format_retention, parse_retention
from app.management.identities import Identities
from app.management.rights import ManagementRights
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.privileges import Privilege
from app.rules.requests.management import (
    CreateWarehouseRequest,
    DeletionPolicySettings,
    GrantRequest,
    SecurableRef,
    SecurableType,
    StorageSettings,
    UpdateWarehouseRequest,
)
from app.storage_access.delegation import CREDENTIALS_MODES, NONE, REMOTE_SIGNING, STATIC
from storage.management_rows import GrantRow, ManagementRows, Securable
from storage.warehouses import KEEP, DeletionPolicy, WarehouseRow

PRIVILEGES = tuple(privilege.value for privilege in Privilege)
SECURABLE_TYPES = tuple(kind.value for kind in SecurableType)
KEY_FIELDS = ("access-key-id", "secret-access-key")
# A federated warehouse without storage access of Growler's own: the remote's is passed on.
NO_OWN_STORAGE = {"endpoint": None, "region": "", "path-style": False, "credentials-mode": NONE}
# What an update of a federated warehouse may change (its remote, its own storage access).
FEDERATED_FIELDS = frozenset({"federation", "storage", "allowed-locations"})


class WarehouseNotEmpty(CatalogError):
    code, error_type = 409, "WarehouseNotEmptyException"


class ManagementService:
    def __init__(
        self,
        settings: Settings,
        rows: ManagementRows,
        identities: Identities,
        warehouses: WarehouseDirectory,
        *,
        rights: ManagementRights,
        page_tokens: PageTokens,
    ) -> None:
        self.rights = rights  # the management API's rights (app/management/rights.py)
        self.page_tokens = page_tokens  # the installation's key (one for all workers): app/edge/factory.py
        self.settings = settings
        self.rows = rows
        self.warehouses = warehouses
        self._box = SecretBox(settings.secrets_key) if settings.secrets_key else None
        # Principals, roles and members: the part's own methods, handed out as this service's so
        # a call goes straight to the part (as TableService hands out its parts', app/tables/service.py)
        self.create_principal = identities.create_principal
        self.list_principals = identities.list_principals
        self.get_principal = identities.get_principal
        self.set_trusted_engine = identities.set_trusted_engine
        self.rotate_principal = identities.rotate_principal
        self.delete_principal = identities.delete_principal
        self.create_role = identities.create_role
        self.list_roles = identities.list_roles
        self.get_role = identities.get_role
        self.set_role_trusted_engine = identities.set_role_trusted_engine
        self.delete_role = identities.delete_role
        self.assign_role = identities.assign_role
        self.revoke_role = identities.revoke_role
        self.list_members = identities.list_members

    def _changed(self, action: str, who: str | None, target: dict[str, Any]) -> None:
        audit(action, who, target)

    # -- grants -----------------------------------------------------------------------------

    def grant(self, role: str, request: GrantRequest) -> GrantRow:
        privilege, on = request.privilege, parse_securable(request.securable)
        target = grant_target(role, request)
        _grantable(privilege, on)
        who = self.rights.require_grantor("grant", target, privilege, on)
        row = self.rows.add_grant(role, privilege.value, on, events=management_events("x-grant", target))
        self._changed("grant", who, target)
        return row

    def revoke(self, role: str, request: GrantRequest) -> None:
        privilege, on = request.privilege, parse_securable(request.securable)
        target = grant_target(role, request)
        who = self.rights.require_grantor("revoke", target, privilege, on)
        if not self.rows.remove_grant(role, privilege.value, on, events=management_events("x-revoke", target)):
            raise NotFound(f"Role {role} holds no grant of {privilege.value} on that {on.type}")
        self._changed("revoke", who, target)

    def grants_of_role(self, role: str, page_token: str | None, page_size: int | None) -> Page:
        window = self._window(scope("listGrantsOfRole", role), page_token, page_size)
        return self._page_of_grants(window, lambda after, limit: self.rows.grants_of_role(role, after, limit))

    def grants_on(self, securable: SecurableRef, page_token: str | None, page_size: int | None) -> Page:
        parsed = parse_securable(securable)
        self.rights.require_grants_reader("list-grants", {"securable": securable.view()}, parsed)
        window = self._window(scope("listGrantsOn", securable_view(parsed)), page_token, page_size)
        return self._page_of_grants(window, lambda after, limit: self.rows.grants_on(parsed, after, limit))

    # -- warehouses -------------------------------------------------------------------------

    def create_warehouse(self, request: CreateWarehouseRequest) -> WarehouseRow:
        name = request.name
        who = self.rights.caller()
        if not WAREHOUSE_NAME.match(name) or name in RESERVED_PREFIXES:
            raise BadRequest(f"Invalid warehouse name {name!r}: letters, digits, '_', '.', '-', at most 63")
        if request.federation is not None:
            row = self._create_federated(request)
        else:
            if request.location is None:
                raise BadRequest("location is required (or federation, for a federated warehouse)")
            location, allowed = self._locations(name, request.location, list(request.allowed_locations or ()))
            storage, secret = self._storage(request.storage or StorageSettings(), {}, KEEP, has_keys=False)
            policy = _policy(request, DeletionPolicy())
            events = management_events("x-create-warehouse", {"warehouse": name, "location": location})
            secret_bytes = None if secret is KEEP else secret
            row = self.rows.create_warehouse(name, location, storage, allowed, secret_bytes, policy, events=events)
        if row is None:
            raise AlreadyExists(f"Warehouse already exists: {name}")
        self.warehouses.invalidate()
        self._changed("create-warehouse", who, {"warehouse": name, "location": row.location})
        return row

    def _create_federated(self, request: CreateWarehouseRequest) -> WarehouseRow | None:
        """A federated warehouse (issue 50): its remote's settings checked, the credential toward it
        sealed. It has no location of its own; with ``storage`` and ``allowed-locations`` Growler
        vends or signs for the remote's tables inside those folders itself (docs/federation.md
        "Storage access of Growler's own"), else the remote's storage access is passed on."""
        if request.location is not None:
            raise BadRequest("A federated warehouse has no location of its own (its tables' are the remote's)")
        federation, sealed = federation_settings(request.federation, self._box)
        name = request.name
        storage, allowed, secret = self._federated_storage(name, request.storage, request.allowed_locations, None)
        events = management_events("x-create-warehouse", {"warehouse": name, "federation": federation["uri"]})
        policy = _policy(request, DeletionPolicy())
        return self.rows.create_warehouse(
            name, "", storage, allowed, secret, policy, events=events, federation=federation, federation_secret=sealed
        )

    def _federated_storage(
        self, name: str, given: StorageSettings | None, allowed: Sequence[str] | None, current: WarehouseRow | None
    ) -> tuple[dict[str, Any], list[str], bytes | None]:
        """A federated warehouse's own storage settings (or none: ``credentials-mode`` none) and the
        folders they serve, checked as a native warehouse's: Growler's access is only ever for
        ``allowed-locations``, which overlap no other warehouse's folders (a remote answering with a
        native table's location gets nothing of Growler's for it). Sealed keys, or None."""
        folders = list(allowed if allowed is not None else (current.allowed_locations if current else ()))
        stored = dict(current.storage or {}) if current is not None else {}
        own = current is not None and stored.get("credentials-mode") not in (None, NONE)
        if given is not None and given.credentials_mode == NONE:  # turned off: the remote's access again
            return dict(NO_OWN_STORAGE), [], None
        if given is None and not own:
            if folders:
                raise BadRequest(
                    "allowed-locations of a federated warehouse are the folders its own storage access serves: give"
                    " storage too"
                )
            return dict(NO_OWN_STORAGE), [], None
        if not folders:
            raise BadRequest(
                "A federated warehouse's own storage access needs allowed-locations: the folders of the remote's"
                " tables Growler may vend or sign for"
            )
        has_keys = current is not None and current.storage_secret is not None
        storage, secret = self._storage(given or StorageSettings(), stored if own else {}, KEEP, has_keys=has_keys)
        parsed = [_s3_location(text, "allowed location") for text in folders]
        self._refuse_overlaps(name, parsed)
        kept = current.storage_secret if current is not None else None
        return storage, [p.uri for p in parsed], kept if secret is KEEP else secret  # type: ignore[return-value]

    def list_warehouses(self, page_token: str | None, page_size: int | None) -> Page:
        window = self._window(scope("listWarehouses"), page_token, page_size)
        return window.page(self.rows.list_warehouses(window.after, window.fetch), lambda row: row.name)

    def get_warehouse(self, name: str) -> WarehouseRow:
        return self._warehouse(name)

    def update_warehouse(self, name: str, request: UpdateWarehouseRequest) -> WarehouseRow:
        who = self.rights.caller()
        self._refuse_default(name)
        current = self._warehouse(name)
        if current.federation is not None or request.federation is not None:
            return self._update_federated(current, request)
        allowed_given = request.allowed_locations
        location, allowed = self._locations(
            name,
            request.location if request.location is not None else current.location,
            list(allowed_given if allowed_given is not None else current.allowed_locations),
        )
        storage, secret = self._storage(
            request.storage or StorageSettings(),
            current.storage or {},
            KEEP,
            has_keys=current.storage_secret is not None,
        )
        current_policy = DeletionPolicy(current.deletion_policy, current.retention_s, current.refuse_deletes)
        events = management_events("x-update-warehouse", {"warehouse": name, "fields": request.given()})
        row = self.rows.update_warehouse(
            name, location, storage, allowed, secret, _policy(request, current_policy), events=events
        )
        if row is None:
            raise NotFound(f"Warehouse does not exist: {name}")
        self.warehouses.invalidate()
        self._changed("update-warehouse", who, {"warehouse": name, "fields": request.given()})
        return row

    def _update_federated(self, current: WarehouseRow, request: UpdateWarehouseRequest) -> WarehouseRow:
        """A federated warehouse's remote settings replaced (its credential kept when ``auth`` is
        not given) and its own storage access set; a native warehouse does not become federated,
        nor the other way round."""
        name = current.name
        if current.federation is None:
            raise BadRequest(f"Warehouse {name} is not federated: it takes no federation settings")
        fields = request.given()
        if not set(fields) <= FEDERATED_FIELDS:
            raise BadRequest(
                f"Warehouse {name} is federated: only its federation settings, storage and allowed-locations can change"
            )
        federation, secret = current.federation or {}, KEEP
        if request.federation is not None:
            federation, secret = updated_federation(federation, request.federation, self._box)
        events = management_events("x-update-warehouse", {"warehouse": name, "fields": fields})
        if "storage" in fields or "allowed-locations" in fields:
            storage, allowed, keys = self._federated_storage(name, request.storage, request.allowed_locations, current)
            row = self.rows.update_federation(name, federation, secret, events=events, storage=(storage, allowed, keys))
        else:
            row = self.rows.update_federation(name, federation, secret, events=events)
        if row is None:
            raise NotFound(f"Warehouse does not exist: {name}")
        self.warehouses.invalidate()
        self._changed("update-warehouse", self.rights.caller(), {"warehouse": name, "fields": fields})
        return row

    def delete_warehouse(self, name: str) -> None:
        who = self.rights.caller()
        self._refuse_default(name)
        outcome = self.rows.delete_warehouse(name, events=management_events("x-delete-warehouse", {"warehouse": name}))
        if outcome == "missing":
            raise NotFound(f"Warehouse does not exist: {name}")
        if outcome == "not-empty":
            raise WarehouseNotEmpty(f"Warehouse is not empty (namespaces, or its recycle bin): {name}")
        if outcome == "protected":
            raise Protected(f"Cannot delete warehouse {name}: it is protected; remove the protection first")
        self.warehouses.invalidate()
        self._changed("delete-warehouse", who, {"warehouse": name})

    def _warehouse(self, name: str) -> WarehouseRow:
        try:
            return self.warehouses.get(name)
        except NoSuchWarehouse:
            raise NotFound(f"Warehouse does not exist: {name}") from None

    def _refuse_default(self, name: str) -> None:
        if name == self.settings.warehouse:
            raise BadRequest(f"Warehouse {name} is configured by the environment (GROWLER_WAREHOUSE)")

    def _locations(self, name: str, location: str, allowed: list[str]) -> tuple[str, list[str]]:
        """The location and allowed locations, checked: s3 URIs naming at least a bucket, not
        overlapping another warehouse's location (two warehouses must not share objects)."""
        parsed = [
            _s3_location(text, what)
            for text, what in [(location, "location"), *((a, "allowed location") for a in allowed)]
        ]
        self._refuse_overlaps(name, parsed)
        root = parsed[0].uri if parsed[0].uri.endswith("/") else parsed[0].uri + "/"
        return root, [p.uri for p in parsed[1:]]

    def _refuse_overlaps(self, name: str, parsed: Sequence[Location]) -> None:
        """No folder of one warehouse inside or around another's (its location, or the allowed
        locations of a federated one: the folders its own storage access serves)."""
        for row in self.rows.list_warehouses(None, None):
            if row.name == name:
                continue
            theirs = [row.location] if row.federation is None else list(row.allowed_locations)
            for text in theirs:
                other = Location.parse(text)
                for mine in parsed:
                    if mine.overlaps(other):
                        raise BadRequest(f"Location {mine.uri} overlaps the location of warehouse {row.name}")

    def _storage(
        self, given: StorageSettings, current: dict[str, Any], secret: object, has_keys: bool
    ) -> tuple[dict[str, Any], object]:
        """The stored (non-secret) storage settings, and the sealed keys (``KEEP`` when unchanged).

        ``has_keys``: the warehouse holds keys of its own already. ``static`` mode hands a
        warehouse's keys to every client, so it needs keys of its own: never the server's, which
        reach every bucket Growler serves. An endpoint carrying user info (shown back to every
        administrator and client), a query or a fragment is refused: keys go in their own fields.
        A new warehouse without a ``credentials-mode`` takes ``_default_mode``'s.
        """
        storage = {
            "endpoint": current.get("endpoint") or self.settings.s3.endpoint,
            "region": current.get("region") or self.settings.s3.region,
            "path-style": current.get("path-style", self.settings.s3.path_style),
            "credentials-mode": current.get("credentials-mode"),
        }
        for key, value in given.model_dump(exclude={"access_key_id", "secret_access_key"}).items():
            storage[key] = value
        given_keys = (given.access_key_id, given.secret_access_key)
        keys = [key.get_secret_value() if key is not None else None for key in given_keys]
        if storage["credentials-mode"] is None:
            storage["credentials-mode"] = self._default_mode(str(storage["endpoint"] or ""), all(keys) or has_keys)
        endpoint = urlparse(str(storage["endpoint"] or ""))
        if endpoint.scheme not in ("http", "https") or not endpoint.netloc or endpoint.path not in ("", "/"):
            raise BadRequest("storage endpoint must be an http(s) URL with no path")
        if "@" in endpoint.netloc or endpoint.query or endpoint.fragment or endpoint.params:
            raise BadRequest(
                "storage endpoint must carry no user info, query or fragment (keys have fields of their own)"
            )
        if storage["credentials-mode"] not in CREDENTIALS_MODES:
            raise BadRequest(f"credentials-mode must be one of {', '.join(CREDENTIALS_MODES)}")
        if any(keys) and not all(keys):
            raise BadRequest("access-key-id and secret-access-key are given together")
        if all(keys):
            if self._box is None:
                raise BadRequest("Storage keys cannot be stored: the server has no GROWLER_SECRETS_KEY")
            secret = self._box.seal(dict(zip(KEY_FIELDS, keys, strict=True)))
        if storage["credentials-mode"] == STATIC and not (all(keys) or has_keys):
            raise BadRequest(
                "credentials-mode static needs keys of the warehouse's own (access-key-id, secret-access-key)"
            )
        return storage, secret

    def _default_mode(self, endpoint: str, own_keys: bool) -> str:
        """A new warehouse's credentials mode when the request names none: the server's
        (``GROWLER_STORAGE_CREDENTIALS_MODE``, ``sts`` where an STS is configured) when the
        warehouse is reached as the default one is, on the server's store with the server's keys
        (that STS and its role are configured for them). ``remote-signing`` otherwise, which needs
        nothing of the store: another store's STS is unknown to Growler, a warehouse's own keys
        may not assume the server's role, and ``static`` never hands out the server's keys."""
        mode = self.settings.storage_credentials_mode
        same_store = endpoint.rstrip("/") == str(self.settings.s3.endpoint or "").rstrip("/")
        return mode if same_store and not own_keys and mode != STATIC else REMOTE_SIGNING

    # -- pagination -------------------------------------------------------------------------

    def _window(self, listing: bytes, page_token: str | None, page_size: int | None) -> PageWindow:
        """A management listing's window: its tokens are sealed for that listing only."""
        return PageWindow.of(page_token, page_size, self.settings.max_page_size, str, self.page_tokens, listing)

    def _page_of_grants(self, window: PageWindow, fetch: Callable[[int | None, int | None], list[GrantRow]]) -> Page:
        after = window.after
        if isinstance(after, str) and not after.isdigit():  # sealed by us: never
            raise BadRequest("Invalid pageToken")
        rows = fetch(int(after) if isinstance(after, str) else None, window.fetch)
        return window.page(rows, lambda row: str(row.id))


def warehouse_view(row: WarehouseRow) -> dict[str, Any]:
    """A warehouse as the management API shows it: never its keys, only whether it has its own."""
    storage = dict(row.storage or {})
    storage["has-own-keys"] = row.storage_secret is not None
    return {
        "name": row.name,
        "location": row.location,
        "storage": storage,
        "allowed-locations": list(row.allowed_locations),
        "deletion-policy": {"mode": row.deletion_policy, "retention": format_retention(row.retention_s)},
        "refuse-deletes": row.refuse_deletes,
        "protected": row.protected,
        **({"federation": federation_view(row.federation, row.federation_secret)} if row.federation else {}),
    }


def _policy(request: UpdateWarehouseRequest, current: DeletionPolicy) -> DeletionPolicy:
    """The deletion policy a create or update asks for, over ``current`` (issue 35)."""
    given = request.deletion_policy or DeletionPolicySettings()
    mode = given.mode or current.mode
    retention_s = current.retention_s
    if given.retention is not None:
        try:
            retention_s = parse_retention(given.retention)
        except ValueError as exc:
            raise BadRequest(f"deletion-policy retention: {exc}") from None
    refuse = request.refuse_deletes
    return DeletionPolicy(mode, retention_s, current.refuse_deletes if refuse is None else refuse)


def grant_target(role: str, request: GrantRequest) -> dict[str, Any]:
    """A grant's or a revoke's audit target and change event: the role, the privilege, the
    securable as the request named it."""
    return {"role": role, "privilege": request.privilege.value, "securable": request.securable.view()}


def grant_view(row: GrantRow) -> dict[str, Any]:
    return {"role": row.role, "privilege": row.privilege, "securable": securable_view(row.securable)}


def securable_view(securable: Securable) -> dict[str, Any]:
    view: dict[str, Any] = {"type": securable.type}
    if securable.warehouse is not None:
        view["warehouse"] = securable.warehouse
    if securable.type in ("namespace", "table", "view"):
        view["namespace"] = list(securable.namespace)
    if securable.name is not None:
        view["name"] = securable.name
    return view


def parse_securable(securable: SecurableRef) -> Securable:
    """A securable named by its parts; each type needs exactly the parts that locate it."""
    kind = securable.type.value
    depth = SECURABLE_TYPES.index(kind)
    warehouse, namespace, name = securable.warehouse, securable.namespace, securable.name
    needs = {"warehouse": depth >= 1, "namespace": depth >= 2, "name": depth >= 3}
    for part, value in (("warehouse", warehouse), ("namespace", namespace), ("name", name)):
        if needs[part] and not value:
            raise BadRequest(f"A {kind} securable needs a {part}")
        if not needs[part] and value:
            raise BadRequest(f"A {kind} securable has no {part}")
    if namespace is not None and not all(namespace):
        raise BadRequest("securable namespace must be a list of non-empty strings")
    return Securable(kind, warehouse or None, tuple(namespace or ()), name or None)


def _grantable(privilege: Privilege, securable: Securable) -> None:
    if privilege is Privilege.CREATE_PRINCIPAL and securable.type != "catalog":
        raise BadRequest("create-principal is granted on the catalog only")


def _s3_location(text: object, what: str) -> Location:
    try:
        location = Location.parse(text, what)
    except InvalidLocation as exc:
        raise BadRequest(str(exc.message)) from exc
    if location.scheme != "s3":
        raise BadRequest(f"Invalid {what} {location.uri}: a managed warehouse lives in S3 (s3://bucket/path)")
    return location
