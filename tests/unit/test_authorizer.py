"""The authorizer fails closed (issue 34): an enforcing one asked to decide with no caller - a
code path that forgot to carry the principal - refuses with 401, and only the explicit
``Authorizer.allow_all()`` lets everything through without one. No database: the grants come
from a stand-in repository that counts its queries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.authorization import Authorizer
from app.ground.callers import OWN, Principal, current_principal
from app.ground.errors import NotAuthorized
from app.rules.privileges import Kind, Privilege, Securable
from storage.grants import Holdings

TABLE = Securable.of_entry(Kind.TABLE, "wh", ("a",), "t")
NAMESPACE_PARAMS = {"prefix": "wh", "namespace": "a"}


class Grants:
    """A grants repository whose principals hold nothing (admin: everything), counting queries."""

    def __init__(self, admin: bool = False) -> None:
        self.admin = admin
        self.queries = 0

    def holdings(self, principal: str, claimed_roles: tuple[str, ...] = (), *, own: bool = True) -> Holdings:
        self.queries += 1
        return Holdings(self.admin, [])


@pytest.fixture
def no_caller() -> Iterator[None]:
    token = current_principal.set(None)
    try:
        yield
    finally:
        current_principal.reset(token)


@pytest.fixture
def a_caller() -> Iterator[None]:
    token = current_principal.set(Principal("root", OWN))
    try:
        yield
    finally:
        current_principal.reset(token)


def enforcing(grants: Grants) -> Authorizer:
    return Authorizer(grants, lambda: 1, default_warehouse="wh")  # type: ignore[arg-type]


def test_an_enforcing_authorizer_refuses_every_decision_without_a_caller(no_caller):
    grants = Grants(admin=True)  # even a repository that would allow everything is never asked
    authorizer = enforcing(grants)
    assert authorizer.cached() is None  # nothing decided on the event loop: the handler refuses
    for decide in (
        lambda: authorizer.authorize("loadNamespaceMetadata", NAMESPACE_PARAMS),
        lambda: authorizer.authorize("listNamespaces", {"prefix": "wh"}),
        authorizer.grants,
        lambda: authorizer.may(Privilege.READ, TABLE),
        lambda: authorizer.sees(TABLE),
        lambda: authorizer.filter(["t"], lambda name: TABLE),
    ):
        with pytest.raises(NotAuthorized) as refused:
            decide()
        assert refused.value.code == 401 and refused.value.error_type == "NotAuthorizedException"
        assert refused.value.headers() == {"WWW-Authenticate": "Bearer"}
    assert grants.queries == 0


def test_allow_all_still_allows_everything_without_a_caller(no_caller):
    authorizer = Authorizer.allow_all()
    assert authorizer.cached() is not None and authorizer.grants().admin
    authorizer.authorize("dropNamespace", NAMESPACE_PARAMS)
    assert authorizer.may(Privilege.WRITE, TABLE) and authorizer.sees(TABLE)
    assert authorizer.filter(["t"], lambda name: TABLE) == ["t"]


def test_a_caller_is_decided_for_by_its_grants(a_caller):
    """With a caller, the enforcing authorizer asks the repository once, then uses its cache."""
    grants = Grants(admin=True)
    authorizer = enforcing(grants)
    authorizer.authorize("dropNamespace", NAMESPACE_PARAMS)
    assert authorizer.may(Privilege.WRITE, TABLE) and authorizer.cached() is not None
    assert grants.queries == 1


def test_a_caller_without_grants_is_refused_with_403_not_401(a_caller):
    authorizer = enforcing(Grants(admin=False))
    assert not authorizer.may(Privilege.READ, TABLE)
    with pytest.raises(Exception) as refused:
        authorizer.authorize("dropNamespace", NAMESPACE_PARAMS)
    assert getattr(refused.value, "code", None) in (403, 404)
