"""Tokens from a real identity provider (Keycloak) next to Growler's own, in one app ("mixed").

Keycloak is started by the test (tests/integration/keycloak_support.py); its realm, clients and
keys are made through its admin REST API. Growler is given only the issuer URL: it finds the
keys through the discovery document.
"""

from __future__ import annotations

import json

import jwt
import pytest
from prometheus_client import REGISTRY

from tests.conftest import auth_settings_for_tests, fetch_token
from tests.integration.keycloak_support import start_keycloak

REALM = "growler"
AUDIENCE = "growler-catalog"


@pytest.fixture(scope="module")
def keycloak(tmp_path_factory):
    server = start_keycloak(tmp_path_factory.mktemp("keycloak"))
    try:
        server.create_realm(REALM)
        server.create_client(REALM, "etl", "etl-secret", AUDIENCE)
        server.create_client(REALM, "elsewhere", "elsewhere-secret", None)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def mixed_app(settings, app, keycloak):
    from app.edge.factory import create_app

    auth = auth_settings_for_tests(
        oidc_issuer=keycloak.issuer(REALM),
        oidc_audience=AUDIENCE,
        oidc_principal_claim="preferred_username",
        oidc_roles_claim="realm_access.roles",
        oidc_jwks_min_refresh_s=0.0,  # every unknown kid re-fetches: the rotation test's timing is its own
    )
    return create_app(settings, auth)


def _get(app, token: str, **headers: str):
    return app.test_client().get("/v1/config", headers={"Authorization": f"Bearer {token}", **headers})


def _failures(reason: str) -> float:
    return REGISTRY.get_sample_value("growler_auth_failures_total", {"reason": reason}) or 0.0


def test_idp_and_own_tokens_are_accepted_at_once(mixed_app, keycloak, capsys):
    idp_token = keycloak.client_token(REALM, "etl", "etl-secret")
    assert jwt.decode(idp_token, options={"verify_signature": False})["aud"] in (AUDIENCE, [AUDIENCE, "account"])
    capsys.readouterr()
    assert _get(mixed_app, idp_token, **{"X-Request-Id": "idp-1"}).status_code == 200
    own_token = fetch_token(mixed_app.test_client())
    assert _get(mixed_app, own_token).status_code == 200
    err = capsys.readouterr().err
    [line] = [json.loads(s) for s in err.splitlines() if s.startswith("{") and '"idp-1"' in s]
    assert line["principal"] == "service-account-etl"
    assert idp_token not in err


def test_wrong_audience_is_refused(mixed_app, keycloak):
    before = _failures("audience")
    token = keycloak.client_token(REALM, "elsewhere", "elsewhere-secret")
    response = _get(mixed_app, token)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "NotAuthorizedException"
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert _failures("audience") == before + 1


def test_a_token_of_another_realm_is_refused(mixed_app, keycloak):
    assert _get(mixed_app, keycloak.admin_token()).status_code == 401  # master realm: other keys, issuer


def test_key_rotation_at_the_idp_is_picked_up_without_restart(mixed_app, keycloak):
    before = keycloak.client_token(REALM, "etl", "etl-secret")
    assert _get(mixed_app, before).status_code == 200
    keycloak.rotate_keys(REALM)
    after = keycloak.client_token(REALM, "etl", "etl-secret")
    assert jwt.get_unverified_header(after)["kid"] != jwt.get_unverified_header(before)["kid"]
    assert _get(mixed_app, after).status_code == 200
    assert _get(mixed_app, before).status_code == 200  # the old key is still published, still valid


def test_idp_tokens_are_not_exchanged_for_own_ones(mixed_app, keycloak):
    token = keycloak.client_token(REALM, "etl", "etl-secret")
    response = mixed_app.test_client().post(
        "/v1/oauth/tokens",
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token",
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
