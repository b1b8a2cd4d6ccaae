"""POST /v1/oauth/tokens: client credentials (form and HTTP Basic), token exchange, RFC 6749 errors."""

from __future__ import annotations

import base64
import time
import uuid

import jwt
import pytest

from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET

TOKENS = "/v1/oauth/tokens"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


@pytest.fixture
def anonymous(auth_app):
    return auth_app.test_client()


def _basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def _assert_oauth_error(response, status: int, error: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error and isinstance(body["error_description"], str)
    assert response.headers["cache-control"] == "no-store"


def _assert_token(response, client_id: str = TEST_CLIENT_ID) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "bearer" and body["expires_in"] == 3600
    assert body["issued_token_type"] == ACCESS
    assert response.headers["cache-control"] == "no-store"
    header = jwt.get_unverified_header(body["access_token"])
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert header["alg"] == "RS256" and header["kid"]
    assert claims["iss"] == "growler" and claims["aud"] == "growler" and claims["sub"] == client_id
    assert claims["exp"] - claims["iat"] == 3600 and abs(claims["iat"] - time.time()) < 60
    assert isinstance(claims["gen"], int)
    return body


def test_client_secret_post(anonymous):
    data = {"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET}
    body = _assert_token(anonymous.post(TOKENS, data=data))
    ok = anonymous.get("/v1/config", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert ok.status_code == 200


def test_http_basic_as_pyiceberg_sends_it(anonymous):
    basic = _basic(TEST_CLIENT_ID, TEST_CLIENT_SECRET)
    response = anonymous.post(TOKENS, data={"grant_type": "client_credentials"}, headers=basic)
    _assert_token(response)


@pytest.mark.parametrize("scope", [None, "", "catalog", "PRINCIPAL_ROLE:ALL", "catalog sql unknown:scope"])
def test_any_scope_is_accepted(anonymous, scope):
    data = {"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET}
    if scope is not None:
        data["scope"] = scope
    body = _assert_token(anonymous.post(TOKENS, data=data))
    assert body.get("scope") == (scope or None)


def test_wrong_secret_and_unknown_client(anonymous):
    wrong = {"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": "nope"}
    _assert_oauth_error(anonymous.post(TOKENS, data=wrong), 401, "invalid_client")
    unknown = {"grant_type": "client_credentials", "client_id": "nobody-" + uuid.uuid4().hex, "client_secret": "x"}
    _assert_oauth_error(anonymous.post(TOKENS, data=unknown), 401, "invalid_client")
    basic = anonymous.post(TOKENS, data={"grant_type": "client_credentials"}, headers=_basic(TEST_CLIENT_ID, "nope"))
    _assert_oauth_error(basic, 401, "invalid_client")
    assert basic.headers["www-authenticate"].startswith("Basic")
    missing = anonymous.post(TOKENS, data={"grant_type": "client_credentials"})
    _assert_oauth_error(missing, 401, "invalid_client")


def test_credentials_given_twice_and_different(anonymous):
    data = {"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": "other"}
    response = anonymous.post(TOKENS, data=data, headers=_basic(TEST_CLIENT_ID, TEST_CLIENT_SECRET))
    _assert_oauth_error(response, 400, "invalid_request")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"grant_type": "password", "username": "u", "password": "p"}, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "code": "x"}, "unsupported_grant_type"),
        ({}, "invalid_request"),
        ({"grant_type": EXCHANGE}, "invalid_request"),
        ({"grant_type": EXCHANGE, "subject_token": "x", "subject_token_type": "urn:x"}, "invalid_request"),
    ],
)
def test_request_errors(anonymous, data, error):
    _assert_oauth_error(anonymous.post(TOKENS, data=data), 400, error)


def test_a_json_body_is_refused(anonymous):
    response = anonymous.post(TOKENS, json={"grant_type": "client_credentials"})
    _assert_oauth_error(response, 400, "invalid_request")


def test_only_post(anonymous):
    response = anonymous.get(TOKENS)
    assert response.status_code == 405 and response.json()["error"] == "invalid_request"


def test_exchange_of_a_valid_token_refreshes_it(anonymous, admin_token):
    data = {"grant_type": EXCHANGE, "subject_token": admin_token, "subject_token_type": ACCESS, "scope": "catalog"}
    # The Java client sends its current token as the bearer of the exchange request too.
    response = anonymous.post(TOKENS, data=data, headers={"Authorization": f"Bearer {admin_token}"})
    body = _assert_token(response)
    assert body["access_token"] != admin_token
    assert anonymous.get("/v1/config", headers={"Authorization": f"Bearer {body['access_token']}"}).status_code == 200


def test_exchange_of_an_expired_or_foreign_token_is_refused(anonymous, expired_token, foreign_token):
    for subject in (expired_token, foreign_token, "not-a-jwt"):
        data = {"grant_type": EXCHANGE, "subject_token": subject, "subject_token_type": ACCESS}
        _assert_oauth_error(anonymous.post(TOKENS, data=data), 400, "invalid_grant")


def test_no_secret_or_token_in_logs_or_metrics(anonymous, capsys):
    data = {"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET}
    token = anonymous.post(TOKENS, data=data).json()["access_token"]
    anonymous.post(TOKENS, data={**data, "client_secret": "wrong-secret-xyz"})
    anonymous.get("/v1/config", headers={"Authorization": f"Bearer {token}"})
    anonymous.get("/v1/config", headers={"Authorization": "Bearer garbage-token-xyz"})
    metrics = anonymous.get("/metrics").text
    out = capsys.readouterr()
    for secret in (TEST_CLIENT_SECRET, "wrong-secret-xyz", token, "garbage-token-xyz"):
        assert secret not in out.err and secret not in out.out and secret not in metrics
    assert 'growler_token_requests_total{grant="client_credentials",outcome="issued"}' in metrics
    assert 'growler_auth_failures_total{reason="malformed"}' in metrics or "growler_auth_failures" in metrics
