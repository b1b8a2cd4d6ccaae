"""Every operation /v1/config advertises (and its unprefixed alias) refuses a request without a
valid token: 401, the Iceberg error body, ``WWW-Authenticate: Bearer``, and nothing written.

The bad tokens: none, garbage, expired, signed by another key, wrong issuer, wrong audience, of
a deleted principal, issued before the principal's secret was rotated. The loadTable GET is answered
on the event loop by the dispatcher (app/edge/loop_reads.py), so it is covered too.
"""

from __future__ import annotations

import re
import time
import uuid

import psycopg
import pytest

from app.composition.services import services_of
from app.edge.factory import load_spec
from app.edge.resolver import implemented_endpoints
from app.management.principals import PrincipalService
from storage.principals import PrincipalRepository
from tests.api.authz_support import wait_for_version
from tests.api.tables_support import create_request
from tests.conftest import TEST_CLIENT_ID, UNWATCHED_TABLES, fetch_token

ENDPOINTS = implemented_endpoints(load_spec())
VALUES = {"prefix": "test", "namespace": "ns", "table": "t", "view": "v", "function": "f", "plan-id": "p1"}
BAD_TOKENS = ["none", "garbage", "expired", "signature", "issuer", "audience", "deleted", "rotated"]


def _requests() -> list[tuple[str, str]]:
    found = []
    for endpoint in ENDPOINTS:
        method, path = endpoint.split(" ", 1)
        concrete = re.sub(r"\{([^}]+)\}", lambda m: VALUES[m.group(1)], path)
        found.append((method, concrete))
        if concrete.startswith("/v1/test/"):
            found.append((method, "/v1/" + concrete[len("/v1/test/") :]))  # the default warehouse
    return found


REQUESTS = _requests()


def _snapshot(db: psycopg.Connection) -> dict[str, tuple]:
    tables = [row[0] for row in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    return {
        table: db.execute(f'SELECT count(*), coalesce(sum(hashtext(x::text)), 0) FROM "{table}" x').fetchone()
        for table in tables
        if table not in UNWATCHED_TABLES  # the publisher's lease (a clock), the audit trail
    }


def _revoked_token(auth_app, token_forge, settings, action: str) -> str:
    principals = PrincipalService(PrincipalRepository(token_forge._database))
    credential = principals.create("m-" + uuid.uuid4().hex[:10])
    token = fetch_token(auth_app.test_client(), credential.client_id, credential.secret)
    client = auth_app.test_client(headers={"Authorization": f"Bearer {token}"})
    assert client.get("/v1/config").status_code == 403  # accepted (not 401), and it holds no grant
    assert (principals.delete if action == "deleted" else principals.rotate)(credential.client_id)
    # Refused from the poll that reads the version the change wrote: waited for as that version (a
    # condition; the timeout only stops a poll that never comes, so a slow machine cannot fail it),
    # then the next request must be refused.
    wait_for_version(services_of(auth_app.app).authorizer._version, settings.database_url, timeout_s=60)
    assert client.get("/v1/config").status_code == 401, f"token still accepted after the principal was {action}"
    return token


@pytest.fixture
def bad_tokens(auth_app, token_forge, expired_token, foreign_token, settings) -> dict[str, str | None]:
    return {
        "none": None,
        "garbage": "not.a-token",
        "expired": expired_token,
        "signature": foreign_token,
        "issuer": token_forge.sign(TEST_CLIENT_ID, iss="someone-else"),
        "audience": token_forge.sign(TEST_CLIENT_ID, aud="another-service"),
        "deleted": _revoked_token(auth_app, token_forge, settings, "deleted"),
        "rotated": _revoked_token(auth_app, token_forge, settings, "rotated"),
    }


def test_every_operation_refuses_bad_tokens_and_writes_nothing(auth_app, auth_client, bad_tokens, db):
    assert auth_client.post("/v1/test/namespaces", json={"namespace": ["ns"]}).status_code == 200
    created = auth_client.post("/v1/test/namespaces/ns/tables", json=create_request("t"))
    assert created.status_code == 200, created.text
    before = _snapshot(db)
    anonymous = auth_app.test_client()
    for kind, token in bad_tokens.items():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        for method, path in REQUESTS:
            body = {"json": {"namespace": ["x"]}} if method in ("POST", "PUT") else {}
            response = anonymous.request(method, path, headers=headers, **body)
            where = (kind, method, path)
            assert response.status_code == 401, (where, response.status_code, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer"), where
            if method != "HEAD":
                error = response.json()["error"]
                assert error["type"] == "NotAuthorizedException" and error["code"] == 401, where
                assert not token or token not in response.text
    assert _snapshot(db) == before
    # the same operations with a valid token are answered as before: never a 401
    for method, path in REQUESTS:
        if method == "GET" or method == "HEAD":
            assert auth_client.request(method, path).status_code != 401, (method, path)


def test_unknown_routes_are_authenticated_too(auth_app):
    response = auth_app.test_client().get("/v1/test/no/such/route")
    assert response.status_code == 401


def test_probes_stay_open(auth_app):
    anonymous = auth_app.test_client()
    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/readyz").status_code == 200
    assert anonymous.get("/metrics").status_code == 200


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "Token abc"])
def test_malformed_authorization_headers(auth_app, header):
    response = auth_app.test_client().get("/v1/config", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "NotAuthorizedException"


def test_a_token_not_valid_yet_is_refused(auth_app, token_forge):
    later = int(time.time()) + 3600
    token = token_forge.sign(TEST_CLIENT_ID, nbf=later, iat=later, exp=later + 600)
    assert auth_app.test_client().get("/v1/config", headers={"Authorization": f"Bearer {token}"}).status_code == 401
