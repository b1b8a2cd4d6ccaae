"""Who may do what: privileges, securables and the decision (pure: no I/O, no clock).

A grant gives one privilege on one securable. Securables form one tree: the catalog (every
warehouse) -> a warehouse -> a namespace -> its nested namespaces -> the tables, views and
functions in them. A privilege held on a node is held on everything below it (grants inherit
down), nothing is held that was not granted (deny by default), and an admin holds everything.

A securable is addressed by its *path* (warehouse name, namespace levels, entry name), not by
the ids the grants point at: the service resolves a principal's grants to paths once, when it
loads them, so a decision is a handful of dictionary lookups. ``WRITE`` includes ``READ``.

"Seeing" something is weaker than any privilege: a caller sees a node when it holds any
privilege on it or above it, or any grant below it (the way down to what it was granted). What a
caller may not use is answered 403 when it can see the node's container and 404 otherwise, so
neither answer depends on whether the thing exists: no existence leaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from app.rules.restrictions.policies import ReadPolicy, Restrictions, restrictions_on


class Privilege(StrEnum):
    READ = "read"  # list, load, exists, plan, read-only credentials and signing, metrics reports
    WRITE = "write"  # commit (data and metadata): includes READ
    CREATE = "create"  # tables, views and namespaces under the securable
    DROP = "drop"  # drop or unregister; the source side of a rename
    MANAGE_PROPERTIES = "manage-properties"  # namespace properties
    MANAGE_GRANTS = "manage-grants"  # give and take the privileges one holds on the securable, to roles
    CREATE_PRINCIPAL = "create-principal"  # on the catalog only: make principals (never admins)
    UNDROP = "undrop"  # list the recycle bin and bring back what was dropped under the securable
    MANAGE_MAINTENANCE = "manage-maintenance"  # attach maintenance policies, run maintenance (issue 37)


IMPLIES: dict[Privilege, frozenset[Privilege]] = {
    Privilege.WRITE: frozenset({Privilege.WRITE, Privilege.READ}),
}


def implied(privilege: Privilege) -> frozenset[Privilege]:
    return IMPLIES.get(privilege, frozenset({privilege}))


class Kind(StrEnum):
    CATALOG = "catalog"
    WAREHOUSE = "warehouse"
    NAMESPACE = "namespace"
    TABLE = "table"
    VIEW = "view"
    FUNCTION = "function"  # not grantable on its own: inherits from its namespace


class SecurableType(StrEnum):
    """The management yaml's SecurableType: what a grant, a protection mark or a policy is on (the
    grantable ``Kind`` values; the management models' type, app/rules/contract/management.py)."""

    CATALOG = "catalog"
    WAREHOUSE = "warehouse"
    NAMESPACE = "namespace"
    TABLE = "table"
    VIEW = "view"


# A node of the tree: (warehouse, namespace levels, entry name). The catalog is (None, (), None).
Key = tuple[str | None, tuple[str, ...], str | None]
CATALOG_KEY: Key = (None, (), None)


@dataclass(frozen=True)
class Securable:
    kind: Kind
    warehouse: str | None = None
    namespace: tuple[str, ...] = ()
    name: str | None = None

    @classmethod
    def catalog(cls) -> Securable:
        return cls(Kind.CATALOG)

    @classmethod
    def of_warehouse(cls, warehouse: str) -> Securable:
        return cls(Kind.WAREHOUSE, warehouse)

    @classmethod
    def of_namespace(cls, warehouse: str, namespace: tuple[str, ...]) -> Securable:
        return cls(Kind.NAMESPACE, warehouse, tuple(namespace))

    @classmethod
    def of_entry(cls, kind: Kind, warehouse: str, namespace: tuple[str, ...], name: str) -> Securable:
        return cls(kind, warehouse, tuple(namespace), name)

    @property
    def key(self) -> Key:
        """Its node in the tree; a function is not grantable on its own: its namespace's."""
        if self.kind is Kind.FUNCTION:
            return (self.warehouse, self.namespace, None)
        return (self.warehouse, self.namespace, self.name)

    def container(self) -> Securable:
        """The node above: a namespace for an entry, the parent (or the warehouse) for a namespace."""
        if self.name is not None:
            return Securable.of_namespace(self.warehouse or "", self.namespace)
        if self.namespace:
            if len(self.namespace) > 1:
                return Securable.of_namespace(self.warehouse or "", self.namespace[:-1])
            return Securable.of_warehouse(self.warehouse or "")
        return Securable.catalog()

    def describe(self) -> str:
        """For messages and the audit log: ``table wh:a.b.t``."""
        if self.kind is Kind.CATALOG:
            return "catalog"
        path = ".".join((*self.namespace, *([self.name] if self.name is not None else [])))
        return f"{self.kind.value} {self.warehouse}" + (f":{path}" if path else "")


def chain(key: Key) -> list[Key]:
    """The node and every node above it, the catalog first."""
    warehouse, namespace, name = key
    keys: list[Key] = [CATALOG_KEY]
    if warehouse is None:
        return keys
    keys.append((warehouse, (), None))
    keys.extend((warehouse, namespace[:depth], None) for depth in range(1, len(namespace) + 1))
    if name is not None:
        keys.append(key)
    return keys


@dataclass(frozen=True)
class Grant:
    privilege: Privilege
    securable: Securable


@dataclass(frozen=True)
class EffectiveGrants:
    """What one principal holds, indexed for decisions: built once per load, then read-only."""

    admin: bool = False
    held: dict[Key, frozenset[Privilege]] = field(default_factory=dict)
    navigable: frozenset[Key] = frozenset()  # every node with a grant on or below it
    # the caller's read restrictions (app/rules/restrictions/), loaded and cached with its grants
    restrictions: tuple[ReadPolicy, ...] = ()
    trusted_engine: bool = False  # applies them itself: may be given a restricted table's metadata

    @classmethod
    def build(
        cls,
        grants: Iterable[Grant],
        admin: bool = False,
        restrictions: Iterable[ReadPolicy] = (),
        trusted_engine: bool = False,
    ) -> EffectiveGrants:
        held: dict[Key, set[Privilege]] = {}
        navigable: set[Key] = set()
        for grant in grants:
            key = grant.securable.key
            held.setdefault(key, set()).update(implied(grant.privilege))
            navigable.update(chain(key))
        frozen = {k: frozenset(v) for k, v in held.items()}
        return cls(admin, frozen, frozenset(navigable), tuple(restrictions), trusted_engine)

    def restrictions_on(self, securable: Securable, through: Sequence[Securable] = ()) -> Restrictions | None:
        """The caller's read restrictions on a table or view (None: none; administrators have none:
        they could remove any); ``through``: the views it is read through (loadTable's
        ``referenced-by``), whose own restrictions apply to it too."""
        if self.admin or not self.restrictions:
            return None
        return restrictions_on(self.restrictions, [*chain(securable.key), *(view.key for view in through)])

    def restricted_within(self, securable: Securable) -> bool:
        """Has read restrictions on something at, above or below the node: what a recursive drop
        of a namespace would take along (the tables registered again after it would be new
        entries, without the restrictions on them)."""
        if self.admin or not self.restrictions:
            return False
        node, above = securable.key, set(chain(securable.key))
        return any(policy.key in above or node in chain(policy.key) for policy in self.restrictions)

    def holds(self, privilege: Privilege, securable: Securable) -> bool:
        if self.admin:
            return True
        held = self.held
        return any(privilege in held.get(key, ()) for key in chain(securable.key))

    def holds_within(self, privilege: Privilege, securable: Securable) -> bool:
        """Holds ``privilege`` on the node, above it or on something below it: what a request
        naming only a warehouse (an undrop, a mark, a policy) needs before the stored unit or the
        parsed body says exactly where."""
        if self.holds(privilege, securable):
            return True
        node = securable.key
        return any(privilege in held and node in chain(key) for key, held in self.held.items())

    def manages_grants(self) -> bool:
        """Holds ``manage-grants`` somewhere: may make roles and read the role directory."""
        return self.admin or any(Privilege.MANAGE_GRANTS in held for held in self.held.values())

    def may_grant(self, privilege: Privilege, securable: Securable) -> bool:
        """May give or take ``privilege`` on ``securable``: holds ``manage-grants`` there and the
        privilege itself. Nobody hands out what it does not hold, so no grant (to a role of one's
        own or anyone's) raises its giver above what it had."""
        return self.holds(Privilege.MANAGE_GRANTS, securable) and self.holds(privilege, securable)

    def manages_role(self, grants: Iterable[Grant]) -> bool:
        """May change who holds a role (or drop it): could give every grant the role holds. So
        joining a role, oneself or anyone, never reaches past what the caller could grant anyway."""
        return self.manages_grants() and all(self.may_grant(g.privilege, g.securable) for g in grants)

    def sees(self, securable: Securable) -> bool:
        """Any privilege on the node or above it, or a grant below it."""
        if self.admin or securable.kind is Kind.CATALOG:
            return True
        return securable.key in self.navigable or any(key in self.held for key in chain(securable.key))


ALLOW, FORBIDDEN, HIDDEN = "allow", "forbidden", "hidden"


def decide(grants: EffectiveGrants, privilege: Privilege | None, securable: Securable) -> str:
    """``allow``; ``forbidden`` (403: the caller sees the container); ``hidden`` (404).

    ``privilege`` None asks only to see the securable (a namespace's existence or properties,
    the listing of a namespace's children).
    """
    allowed = grants.sees(securable) if privilege is None else grants.holds(privilege, securable)
    if allowed:
        return ALLOW
    if securable.kind in (Kind.CATALOG, Kind.WAREHOUSE) or grants.sees(securable.container()):
        return FORBIDDEN
    return HIDDEN
