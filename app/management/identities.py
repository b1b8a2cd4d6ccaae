"""The management API's identities: principals (their credentials and trusted-engine marks), roles
(theirs too) and who holds which role.

A part of ``ManagementService`` (app/management/service.py), which hands out these methods as its
own (``self.create_principal = identities.create_principal``): the handlers and the console call
``services.management``, the code runs here. Its own module because who exists and who holds what
changes for other reasons than what a role is granted and which warehouses there are (the rest of
the management API); both stand on the one ``ManagementRights`` (app/management/rights.py), built
once and handed to each. Every change writes one audit line (``app.ground.events.audit``: who,
what, which principal or role; never a secret) and its change events, with the change. SQL:
``storage/principals.py`` (through ``PrincipalService``, which hashes the secrets) and
``storage/management_rows.py`` (roles and members).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.catalog.paging import Page, PageWindow
from app.events.changes import management_events
from app.ground.errors import AlreadyExists, BadRequest, NotFound
from app.ground.events import audit
from app.ground.page_tokens import PageTokens, scope
from app.ground.settings import Settings
from app.management.principals import CLIENT_ID, Credential, PrincipalService
from app.management.rights import ManagementRights
from app.rules.requests.management import CreatePrincipalRequest, CreateRoleRequest
from storage.management_rows import ManagementRows, RoleRow

ROLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


class NoSuchPrincipal(NotFound):
    pass


class NoSuchRole(NotFound):
    pass


class Identities:
    """Principals, roles and memberships: created, listed, marked and deleted, each change checked
    against the caller (``rights``), audited and recorded in the change feed."""

    def __init__(
        self,
        settings: Settings,
        rows: ManagementRows,
        principals: PrincipalService,
        *,
        rights: ManagementRights,
        page_tokens: PageTokens,
    ) -> None:
        self.rights = rights  # the management API's rights, the same object ManagementService holds
        self.page_tokens = page_tokens  # the installation's key (one for all workers): app/edge/factory.py
        self.settings = settings
        self.rows = rows
        self.principals = principals

    def _changed(self, action: str, who: str | None, target: dict[str, Any]) -> None:
        audit(action, who, target)

    # -- principals -------------------------------------------------------------------------

    def create_principal(self, request: CreatePrincipalRequest) -> Credential:
        name, admin, trusted = request.name, request.admin, bool(request.trusted_engine)
        who = self.rights.caller()
        if not CLIENT_ID.match(name):
            raise BadRequest(f"Invalid principal name {name!r}: letters, digits, '.', '_', '@', '-', at most 128")
        if trusted:  # trusting an engine is an administrator's, as marking it later is
            self.rights.require_admin("set-trusted-engine", {"principal": name}, "mark trusted engines")
        created = {"principal": name, "admin": admin, **({"trusted-engine": True} if trusted else {})}
        events = management_events("x-create-principal", created)
        credential = self.principals.create(name, is_admin=admin, trusted_engine=trusted, events=events)
        if credential is None:
            raise AlreadyExists(f"Principal already exists: {name}")
        self._changed("create-principal", who, {"principal": name, "admin": admin})
        return credential

    def list_principals(self, page_token: str | None, page_size: int | None) -> Page:
        names = [row.client_id for row in self.principals.repository.list() if not row.deleted]
        window = self._window(scope("listPrincipals"), page_token, page_size)
        return self._page_of_names(window, lambda after, limit: _slice(names, after, limit))

    def get_principal(self, name: str) -> dict[str, Any]:
        row = self.principals.repository.get(name) if CLIENT_ID.match(name) else None
        if row is None or row.deleted:
            raise NoSuchPrincipal(f"Principal does not exist: {name}")
        roles = self.rows.roles_of(name)
        return {"name": row.client_id, "admin": row.is_admin, "trusted-engine": row.trusted_engine, "roles": roles}

    def set_trusted_engine(self, name: str, trusted: bool) -> dict[str, Any]:
        """Mark a principal as a trusted engine (read restrictions, docs/read-restrictions.md): it
        is then given a restricted table's metadata and storage access, with the restrictions."""
        who = self.rights.caller()
        target = {"principal": name, "trusted-engine": trusted}
        events = management_events("x-set-trusted-engine", target)
        if not (CLIENT_ID.match(name) and self.principals.repository.set_trusted_engine(name, trusted, events=events)):
            raise NoSuchPrincipal(f"Principal does not exist: {name}")
        self._changed("set-trusted-engine", who, target)
        return self.get_principal(name)

    def rotate_principal(self, name: str) -> Credential:
        who = self.rights.caller()
        events = management_events("x-rotate-principal", {"principal": name})  # never the secret
        credential = self.principals.rotate(name, events=events) if CLIENT_ID.match(name) else None
        if credential is None:
            raise NoSuchPrincipal(f"Principal does not exist: {name}")
        self._changed("rotate-principal", who, {"principal": name})
        return credential

    def delete_principal(self, name: str) -> None:
        who = self.rights.caller()
        if who is not None and name == who:
            raise BadRequest("A principal cannot delete itself")
        events = management_events("x-delete-principal", {"principal": name})
        if not (CLIENT_ID.match(name) and self.principals.delete(name, events=events)):
            raise NoSuchPrincipal(f"Principal does not exist: {name}")
        self._changed("delete-principal", who, {"principal": name})

    # -- roles and members ------------------------------------------------------------------

    def create_role(self, request: CreateRoleRequest) -> dict[str, Any]:
        name = request.name
        who = self.rights.caller()
        if not ROLE_NAME.match(name):
            raise BadRequest(f"Invalid role name {name!r}: letters, digits, '.', '_', '@', '-', at most 128")
        row = self.rows.create_role(name, events=management_events("x-create-role", {"role": name}))
        if row is None:
            raise AlreadyExists(f"Role already exists: {name}")
        self._changed("create-role", who, {"role": name})
        return _role_view(row)

    def list_roles(self, page_token: str | None, page_size: int | None) -> Page:
        return self._page_of_names(self._window(scope("listRoles"), page_token, page_size), self.rows.list_roles)

    def get_role(self, name: str) -> dict[str, Any]:
        row = self.rows.get_role(name)
        if row is None:
            raise NoSuchRole(f"Role does not exist: {name}")
        return _role_view(row)

    def set_role_trusted_engine(self, name: str, trusted: bool) -> dict[str, Any]:
        """Mark a role's holders as trusted engines (docs/read-restrictions.md): the way to trust an
        identity provider's principals, which Growler knows only by their token's roles claim."""
        who = self.rights.caller()
        target = {"role": name, "trusted-engine": trusted}
        row = self.rows.set_role_trusted_engine(name, trusted, events=management_events("x-set-trusted-engine", target))
        if row is None:
            raise NoSuchRole(f"Role does not exist: {name}")
        self._changed("set-trusted-engine", who, target)
        return _role_view(row)

    def delete_role(self, name: str) -> None:
        who = self.rights.caller()
        if not self.rows.delete_role(name, events=management_events("x-delete-role", {"role": name})):
            raise NoSuchRole(f"Role does not exist: {name}")
        self._changed("delete-role", who, {"role": name})

    def assign_role(self, role: str, principal: str) -> None:
        who = self.rights.caller()
        self._require_principal(principal)
        target = {"role": role, "principal": principal}
        added = self.rows.add_member(role, principal, events=management_events("x-assign-role", target))
        if added is None:
            raise NoSuchRole(f"Role does not exist: {role}")
        if added:
            self._changed("assign-role", who, {"role": role, "principal": principal})

    def revoke_role(self, role: str, principal: str) -> None:
        who = self.rights.caller()
        target = {"role": role, "principal": principal}
        removed = self.rows.remove_member(role, principal, events=management_events("x-revoke-role", target))
        if removed is None:
            raise NoSuchRole(f"Role does not exist: {role}")
        if not removed:
            raise NotFound(f"Principal {principal} does not hold role {role}")
        self._changed("revoke-role", who, {"role": role, "principal": principal})

    def list_members(self, role: str, page_token: str | None, page_size: int | None) -> Page:
        def fetch(after: str | None, limit: int | None) -> list[str]:
            members = self.rows.list_members(role, after, limit)
            if members is None:
                raise NoSuchRole(f"Role does not exist: {role}")
            return members

        return self._page_of_names(self._window(scope("listRoleMembers", role), page_token, page_size), fetch)

    def _require_principal(self, name: str) -> None:
        row = self.principals.repository.get(name) if CLIENT_ID.match(name) else None
        if row is None or row.deleted:
            raise NoSuchPrincipal(f"Principal does not exist: {name}")

    # -- pagination -------------------------------------------------------------------------

    def _window(self, listing: bytes, page_token: str | None, page_size: int | None) -> PageWindow:
        """A listing's window: its tokens are sealed for that listing only (as the grants' and
        the warehouses' are, in ManagementService)."""
        return PageWindow.of(page_token, page_size, self.settings.max_page_size, str, self.page_tokens, listing)

    def _page_of_names(self, window: PageWindow, fetch: Callable[[str | None, int | None], list[str]]) -> Page:
        return window.page(fetch(window.after, window.fetch))  # type: ignore[arg-type]


def _slice(names: list[str], after: str | None, limit: int | None) -> list[str]:
    rest = [name for name in names if after is None or name > after]
    return rest if limit is None else rest[:limit]


def _role_view(row: RoleRow) -> dict[str, Any]:
    return {"name": row.name, "created-at": row.created_at, "trusted-engine": row.trusted_engine}
