"""Modes and settings, key rotation, the principal in the request log, the 401 counter."""

from __future__ import annotations

import json

import jwt
import pytest
from prometheus_client import REGISTRY

from app.composition.services import services_of
from app.edge.auth.config import AuthSettings, is_loopback_bind
from app.edge.auth.keys import new_key
from tests.api.authz_support import wait_for_version
from tests.conftest import TEST_CLIENT_ID, TEST_KEY_PASSWORD, fetch_token


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [
        ("127.0.0.1:8181", True),
        ("localhost:1", True),
        ("[::1]:8181", True),
        ("unix:/run/g.sock", True),
        ("0.0.0.0:8181", False),
        ("10.0.0.5:8181", False),
        ("[::]:8181", False),
        ("127.0.0.1:1,0.0.0.0:2", False),
        ("", False),
    ],
)
def test_loopback_binds(bind, loopback):
    assert is_loopback_bind(bind) is loopback


def test_authentication_is_on_unless_turned_off():
    """Secure by default: nothing set is oauth2 on any bind, loopback included (a proxy on the same
    host makes loopback reachable); without its key password it refuses to start, never runs open."""
    for bind in ("127.0.0.1:8181", "0.0.0.0:8181"):
        assert AuthSettings.from_env({"GROWLER_BIND": bind, "GROWLER_TOKEN_KEY_PASSWORD": "k"}).enabled
        with pytest.raises(ValueError, match="GROWLER_TOKEN_KEY_PASSWORD"):
            AuthSettings.from_env({"GROWLER_BIND": bind})


def test_auth_none_is_refused_off_loopback():
    assert not AuthSettings.from_env({"GROWLER_AUTH": "none", "GROWLER_BIND": "127.0.0.1:8181"}).enabled
    with pytest.raises(ValueError, match="loopback"):
        AuthSettings.from_env({"GROWLER_AUTH": "none", "GROWLER_BIND": "0.0.0.0:8181"})


ON = {"GROWLER_AUTH": "oauth2"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GROWLER_AUTH": "maybe"}, "GROWLER_AUTH"),
        ({"GROWLER_AUTH": "oauth2"}, "GROWLER_TOKEN_KEY_PASSWORD"),
        ({**ON, "GROWLER_TOKEN_KEY_PASSWORD": "k", "GROWLER_TOKEN_TTL_S": "0"}, "GROWLER_TOKEN_TTL_S"),
        ({**ON, "GROWLER_TOKEN_KEY_PASSWORD": "k", "GROWLER_OIDC_ISSUER": "http://idp"}, "GROWLER_OIDC_AUDIENCE"),
        ({"GROWLER_AUTH": "oauth2", "GROWLER_OWN_TOKENS": "false"}, "GROWLER_OIDC_ISSUER"),
        ({**ON, "GROWLER_TOKEN_KEY_PASSWORD": "k", "GROWLER_BOOTSTRAP_CLIENT_ID": "a"}, "go together"),
    ],
)
def test_settings_that_cannot_work_are_refused(env, message):
    with pytest.raises(ValueError, match=message):
        AuthSettings.from_env(env)


def test_key_rotation_keeps_old_tokens_valid(auth_app, admin_token, token_forge, settings):
    old_kid = jwt.get_unverified_header(admin_token)["kid"]
    token_forge.state.repository.add_signing_key(new_key(TEST_KEY_PASSWORD), retire_after_s=3600)
    anonymous = auth_app.test_client()
    # The app signs with the new key from the poll that reads the version the key's insert wrote:
    # waited for as that version (a condition; the timeout only stops a poll that never comes, so a
    # slow machine cannot fail it), then the next token must carry the new key.
    wait_for_version(services_of(auth_app.app).authorizer._version, settings.database_url, timeout_s=60)
    new_token = fetch_token(anonymous)
    assert jwt.get_unverified_header(new_token)["kid"] != old_kid
    for token in (admin_token, new_token):
        assert anonymous.get("/v1/config", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_principal_on_the_request_log_line_and_401s_counted(auth_client, admin_token, capsys):
    def failures(reason: str) -> float:
        return REGISTRY.get_sample_value("growler_auth_failures_total", {"reason": reason}) or 0.0

    before = failures("missing"), failures("malformed")
    capsys.readouterr()
    auth_client.get("/v1/config", headers={"X-Request-Id": "auth-log-1"})
    auth_client.get("/v1/config", headers={"X-Request-Id": "auth-log-2", "Authorization": ""})
    auth_client.get("/v1/config", headers={"X-Request-Id": "auth-log-3", "Authorization": "Bearer x.y"})
    err = capsys.readouterr().err
    lines = {
        doc["request_id"]: doc
        for doc in map(json.loads, filter(lambda s: s.startswith("{"), err.splitlines()))
        if doc.get("event") == "request"
    }
    assert lines["auth-log-1"]["principal"] == TEST_CLIENT_ID and lines["auth-log-1"]["status"] == 200
    assert "principal" not in lines["auth-log-2"] and lines["auth-log-2"]["status"] == 401
    assert lines["auth-log-3"]["status"] == 401
    assert admin_token not in err
    assert (failures("missing"), failures("malformed")) == (before[0] + 1, before[1] + 1)
