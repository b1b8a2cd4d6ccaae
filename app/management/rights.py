"""Who may do what in the management API: least privilege, decided before anything is read or written.

The management API changes who may do what anywhere, so holding one privilege must never lead to
more. Each operation's row of ``MANAGEMENT_OPERATIONS`` (``Managed``, app/management/operations.py) calls one
``require_*`` here before its handler runs (the dispatcher checks it, as every row); a grant's
and a listing's check on the securable its request names follows in ``ManagementService`` once
that is parsed. The rules:

- **Grants**: giving or taking a privilege on a securable needs ``manage-grants`` there *and* the
  privilege itself (``EffectiveGrants.may_grant``): a holder of ``manage-grants`` delegates what it
  has, and cannot grant itself (or anyone) more. Listing the grants on a securable needs
  ``manage-grants`` on it.
- **Roles**: making a role, or reading the role directory, needs ``manage-grants`` somewhere.
  Changing a role's members, reading them or its grants, or dropping it needs the right to give
  every grant the role holds (``manages_role``): joining a role then never reaches past what the
  caller could grant anyway, and an administrator's roles stay out of reach.
- **Principals**: making one needs ``create-principal`` on the catalog; making an administrator,
  deleting a principal and rotating another principal's secret are for administrators; a principal
  of our own may rotate its own secret (so a new secret reaches only an administrator or its owner).
  The directory of principals is for administrators and holders of ``create-principal`` or
  ``manage-grants`` on the catalog.
- **Warehouses** (storage, endpoints, keys, deletion policy): administrators change them; administrators
  and holders of ``manage-grants`` on the catalog read them (never their keys).
- **Recycle bin** (app/recycle_bin/service.py): listing and undrop need ``undrop`` where the unit was (and
  where it comes back); a recursive drop needs ``drop`` on the namespace; a purge at once is for
  administrators. **Protection** (app/protection/service.py): setting, removing and listing marks need
  ``manage-grants`` on the securable (the warehouse for listing).
- **Maintenance** (issue 37): attaching or detaching a policy, and running maintenance, needs
  ``manage-maintenance`` on the securable (inherited from above, like every privilege). A policy
  deletes files, so ``write`` is not enough, and ``manage-grants`` would hand every grant manager
  the power to expire history. Reading a table's effective policies, runs and health needs
  ``manage-maintenance`` or ``read`` on it: the report tells what a reader can see anyway.

"admin" is not a privilege: it is a principal's flag (migration 0015 removed such grants). Every
refusal is a 403 with one audit line; without authentication there is no caller and the
authorizer's grants are everyone's (``ALL``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.authorization import Authorizer, as_grant
from app.ground.audit_note import ALLOWED, REFUSED, note_decision
from app.ground.callers import IDP, current_principal
from app.ground.errors import Forbidden
from app.ground.events import audit
from app.rules.privileges import EffectiveGrants, Kind, Privilege, Securable
from storage.management_rows import ManagementRows
from storage.management_rows import Securable as StoredSecurable

CATALOG = Securable.catalog()


def rules_securable(stored: StoredSecurable) -> Securable:
    return Securable(Kind(stored.type), stored.warehouse, tuple(stored.namespace), stored.name)


class ManagementRights:
    """The gate of the management API: built once (app/composition/storage.py) and given to every
    service that checks it (management, maintenance, the recycle bin, protection, event sinks) and
    to the dispatcher, which runs the ``MANAGEMENT_OPERATIONS`` rows against it."""

    def __init__(self, authorizer: Authorizer, rows: ManagementRows) -> None:
        self.authorizer = authorizer  # required: no permissive default
        self.rows = rows  # a role's grants (``require_role_manager``)

    def _require(
        self, action: str, target: dict[str, Any], allowed: Callable[[EffectiveGrants], bool], refusal: str
    ) -> str | None:
        """The caller's name (None without authentication) when ``allowed`` holds for its grants
        (the authorizer's cached ones, like every catalog decision); 403, audited, otherwise."""
        principal = current_principal.get()
        if allowed(self.authorizer.grants()):
            note_decision(ALLOWED, f"right to {action}")
            return principal.name if principal is not None else None
        audit(action, principal.name if principal else None, target, "forbidden", 403)
        note_decision(REFUSED, refusal)
        raise Forbidden(refusal)

    def caller(self) -> str | None:
        """The caller's name (None without authentication), for the audit line of a change."""
        principal = current_principal.get()
        return principal.name if principal is not None else None

    def require_admin(self, action: str, target: dict[str, Any], what: str) -> str | None:
        return self._require(action, target, lambda grants: grants.admin, f"Only administrators may {what}")

    def require_grant_manager(self, action: str, target: dict[str, Any]) -> str | None:
        return self._require(action, target, EffectiveGrants.manages_grants, "Principal holds manage-grants on nothing")

    def require_principal_directory(self, action: str, target: dict[str, Any]) -> str | None:
        return self._require(
            action,
            target,
            lambda grants: (
                grants.holds(Privilege.CREATE_PRINCIPAL, CATALOG) or grants.holds(Privilege.MANAGE_GRANTS, CATALOG)
            ),
            "Principal lacks create-principal or manage-grants on the catalog",
        )

    def require_principal_maker(self, action: str, target: dict[str, Any], admin: bool) -> str | None:
        if admin:
            return self.require_admin(action, target, "create administrators")
        return self._require(
            action,
            target,
            lambda grants: grants.holds(Privilege.CREATE_PRINCIPAL, CATALOG),
            "Principal lacks create-principal on the catalog",
        )

    def require_self_or_admin(self, action: str, target: dict[str, Any], name: str) -> str | None:
        """An administrator, or the principal of our own named ``name`` itself (an IdP's user
        of that name is someone else: own principals and IdP subjects never share names)."""
        principal = current_principal.get()
        if principal is not None and principal.source != IDP and principal.name == name:
            return principal.name
        return self.require_admin(action, target, "rotate another principal's secret")

    def require_warehouse_reader(self, action: str, target: dict[str, Any]) -> str | None:
        return self._require(
            action,
            target,
            lambda grants: grants.holds(Privilege.MANAGE_GRANTS, CATALOG),
            "Principal lacks manage-grants on the catalog",
        )

    def require_privilege(self, action: str, target: dict[str, Any], privilege: Privilege, on: Securable) -> str | None:
        """``privilege`` held on ``on`` (or above it): the recycle bin's and protection's rule."""
        return self._require(
            action,
            target,
            lambda grants: grants.holds(privilege, on),
            f"Principal lacks {privilege.value} on {on.describe()}",
        )

    def require_unrestricted_within(
        self, action: str, target: dict[str, Any], on: Securable, refusal: str
    ) -> str | None:
        """No read restriction on ``on``, above it or below it: for what would carry the restricted
        tables' data past the restrictions (a recursive drop, after which they could be registered
        again without them; the partition values a table's health and runs name)."""
        return self._require(action, target, lambda grants: not grants.restricted_within(on), refusal)

    def require_within(
        self, action: str, target: dict[str, Any], privileges: tuple[Privilege, ...], on: Securable
    ) -> str | None:
        """One of ``privileges`` held on ``on``, above it or below it: the first check of an
        operation whose exact securable is known only once its stored unit or its body is read
        (the service then checks it there)."""
        return self._require(
            action,
            target,
            lambda grants: any(grants.holds_within(privilege, on) for privilege in privileges),
            f"Principal lacks {' or '.join(p.value for p in privileges)} on or within {on.describe()}",
        )

    def require_reader_of(self, action: str, target: dict[str, Any], on: Securable) -> str | None:
        """``manage-maintenance`` or ``read`` on ``on``: a table's policies, runs and health."""
        return self._require(
            action,
            target,
            lambda grants: grants.holds(Privilege.MANAGE_MAINTENANCE, on) or grants.holds(Privilege.READ, on),
            f"Principal lacks manage-maintenance or read on {on.describe()}",
        )

    def require_grantor(
        self, action: str, target: dict[str, Any], privilege: Privilege, securable: StoredSecurable
    ) -> str | None:
        on = rules_securable(securable)
        return self._require(
            action,
            target,
            lambda grants: grants.may_grant(privilege, on),
            f"Principal lacks manage-grants and {privilege.value} on {on.describe()}",
        )

    def require_grants_reader(self, action: str, target: dict[str, Any], securable: StoredSecurable) -> str | None:
        on = rules_securable(securable)
        return self._require(
            action,
            target,
            lambda grants: grants.holds(Privilege.MANAGE_GRANTS, on),
            f"Principal lacks manage-grants on {on.describe()}",
        )

    def require_role_manager(self, action: str, target: dict[str, Any], role: str) -> str | None:
        """May change, read the members and grants of, or drop ``role`` (404 for a missing role,
        told only to a holder of manage-grants)."""
        self.require_grant_manager(action, target)
        stored = self.rows.grants_of_role(role, None, None)  # NotFound for a missing role
        held = [grant for grant in map(as_grant, stored) if grant is not None]
        return self._require(
            action,
            target,
            lambda grants: grants.manages_role(held),
            f"Principal may not give every grant role {role} holds",
        )

    def require_maintainer(self, action: str, target: dict[str, Any], securable: StoredSecurable) -> str | None:
        on = rules_securable(securable)
        return self._require(
            action,
            target,
            lambda grants: grants.holds(Privilege.MANAGE_MAINTENANCE, on),
            f"Principal lacks manage-maintenance on {on.describe()}",
        )

    def require_maintenance_reader(self, action: str, target: dict[str, Any], securable: StoredSecurable) -> str | None:
        on = rules_securable(securable)
        return self._require(
            action,
            target,
            lambda grants: grants.holds(Privilege.MANAGE_MAINTENANCE, on) or grants.holds(Privilege.READ, on),
            f"Principal lacks manage-maintenance or read on {on.describe()}",
        )
