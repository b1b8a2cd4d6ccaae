"""Tokens from a real identity provider (Keycloak) next to Growler's own, in one app ("mixed").

Keycloak is started by the test (tests/integration/keycloak_support.py); its realm, clients and
keys are made through its admin REST API. Growler is given only the issuer URL: it finds the
keys through the discovery document. One Keycloak serves the whole module (it is slow to start):
the apps built in this process, and a gunicorn server in mixed mode that Spark talks to with
nothing but the IdP's token endpoint and a client of the IdP.
"""

from __future__ import annotations

import json
import time
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from prometheus_client import REGISTRY

from tests.conftest import (
    TEST_CLIENT_ID,
    TEST_CLIENT_SECRET,
    auth_env_for_tests,
    auth_settings_for_tests,
    fetch_token,
)
from tests.integration.conftest import start_server, stop_server
from tests.integration.keycloak_support import KEYCLOAK
from tests.integration.log_support import json_lines

REALM = "growler"
AUDIENCE = "growler-catalog"


@pytest.fixture(scope="module")
def keycloak():
    server = KEYCLOAK.take()
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


@pytest.fixture(scope="module")
def rate_limited_app(settings, app, keycloak):
    """Like ``mixed_app``, with the production default's idea of a refresh interval, made long:
    after the first fetch, no unknown kid fetches the keys again during the test."""
    from app.edge.factory import create_app

    auth = auth_settings_for_tests(
        oidc_issuer=keycloak.issuer(REALM),
        oidc_audience=AUDIENCE,
        oidc_principal_claim="preferred_username",
        oidc_jwks_min_refresh_s=3600.0,
    )
    return create_app(settings, auth)


def _get(app, token: str, **headers: str):
    return app.test_client().get("/v1/config", headers={"Authorization": f"Bearer {token}", **headers})


def _accepted(response) -> bool:
    """The token was accepted: 200, or the 403 of a caller with no grant on the warehouse (an IdP
    client here holds none: getConfig needs to see the warehouse). A refused token is 401."""
    if response.status_code == 403:
        return response.json()["error"]["type"] == "ForbiddenException"
    return response.status_code == 200


def _failures(reason: str) -> float:
    return REGISTRY.get_sample_value("growler_auth_failures_total", {"reason": reason}) or 0.0


def test_idp_and_own_tokens_are_accepted_at_once(mixed_app, keycloak, capsys):
    idp_token = keycloak.client_token(REALM, "etl", "etl-secret")
    assert jwt.decode(idp_token, options={"verify_signature": False})["aud"] in (AUDIENCE, [AUDIENCE, "account"])
    capsys.readouterr()
    assert _accepted(_get(mixed_app, idp_token, **{"X-Request-Id": "idp-1"}))
    own_token = fetch_token(mixed_app.test_client())
    assert _accepted(_get(mixed_app, own_token))
    err = capsys.readouterr().err
    lines = [json.loads(s) for s in err.splitlines() if s.startswith("{") and '"idp-1"' in s]
    [line] = [entry for entry in lines if entry["event"] == "request"]
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


def _jwks_fetches() -> float:
    return REGISTRY.get_sample_value("growler_oidc_jwks_fetches_total", {"outcome": "ok"}) or 0.0


def test_unknown_kids_refetch_the_keys_at_a_bounded_rate(rate_limited_app, keycloak):
    """A flood of tokens naming kids the IdP never published (forged, each with a new kid) is
    refused without a single fetch of the IdP's keys beyond the one the first token caused."""
    before = _jwks_fetches()
    genuine = keycloak.client_token(REALM, "etl", "etl-secret")
    assert _accepted(_get(rate_limited_app, genuine))  # the first token fetches the keys
    assert _jwks_fetches() == before + 1
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": keycloak.issuer(REALM), "aud": AUDIENCE, "preferred_username": "mallory"}
    unknown_key = _failures("unknown_key")
    for _ in range(100):
        forged = jwt.encode(
            {**claims, "exp": int(time.time()) + 300}, forger, "RS256", headers={"kid": uuid.uuid4().hex}
        )
        assert _get(rate_limited_app, forged).status_code == 401
    assert _failures("unknown_key") == unknown_key + 100
    assert _jwks_fetches() == before + 1  # the IdP was not asked again
    assert _accepted(_get(rate_limited_app, keycloak.client_token(REALM, "etl", "etl-secret")))


def test_a_token_of_another_realm_is_refused(mixed_app, keycloak):
    assert _get(mixed_app, keycloak.admin_token()).status_code == 401  # master realm: other keys, issuer


def test_key_rotation_at_the_idp_is_picked_up_without_restart(mixed_app, keycloak):
    before = keycloak.client_token(REALM, "etl", "etl-secret")
    assert _accepted(_get(mixed_app, before))
    keycloak.rotate_keys(REALM)
    after = keycloak.client_token(REALM, "etl", "etl-secret")
    assert jwt.get_unverified_header(after)["kid"] != jwt.get_unverified_header(before)["kid"]
    assert _accepted(_get(mixed_app, after))
    assert _accepted(_get(mixed_app, before))  # the old key is still published, still valid


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


@pytest.fixture(scope="module")
def mixed_server(settings, app, keycloak, tmp_path_factory):
    """gunicorn accepting its own tokens and Keycloak's (mixed mode); no test-admin bearer: the
    clients below authenticate with the IdP only."""
    env = {
        **auth_env_for_tests(),
        "GROWLER_OIDC_ISSUER": keycloak.issuer(REALM),
        "GROWLER_OIDC_AUDIENCE": AUDIENCE,
        "GROWLER_OIDC_PRINCIPAL_CLAIM": "preferred_username",
        "GROWLER_OIDC_ROLES_CLAIM": "realm_access.roles",
    }
    running = start_server(settings, tmp_path_factory.mktemp("gunicorn-mixed"), env, bearer=False)
    try:
        yield running
    finally:
        stop_server(running)


IDP_ROLE = "lakehouse-etl"
ISSUED = 'growler_token_requests_total{grant="client_credentials",outcome="issued"}'


def _grant_warehouse_role(server, role: str, privileges: tuple[str, ...]) -> None:
    """Through the management API, as the bootstrap admin: ``role`` holds ``privileges`` on the
    server's warehouse (an existing role or grant is fine: both Spark lines run this)."""
    import httpx

    token = httpx.post(
        f"{server.url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET},
        timeout=30,
    ).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    management = f"{server.url}/management/v1"
    response = httpx.post(f"{management}/roles", json={"name": role}, headers=headers, timeout=30)
    assert response.status_code in (201, 409), response.text
    for privilege in privileges:
        securable = {"type": "warehouse", "warehouse": server.warehouse}
        body = {"privilege": privilege, "securable": securable}
        response = httpx.post(f"{management}/roles/{role}/grants", json=body, headers=headers, timeout=30)
        assert response.status_code in (200, 201, 409), response.text


def _metric(url: str, sample: str) -> float:
    import httpx

    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.slow
@pytest.mark.parametrize("line", ["3.5", "4.1"])
def test_spark_with_tokens_of_the_idp(mixed_server, keycloak, line):
    """Spark's REST client gets its token from Keycloak (``oauth2-server-uri``, the IdP client's
    ``credential``) and Growler accepts it: create, write, read, drop. The options are docs/security.md's."""
    from tests.integration.spark_support import DRIVERS

    options = {
        "oauth2-server-uri": f"{keycloak.issuer(REALM)}/protocol/openid-connect/token",
        "credential": "etl:etl-secret",
        "scope": "openid",
    }
    # What the IdP's service account may do comes from its realm role, named in its tokens'
    # roles claim: a Growler role of that name holds create, write and drop on the warehouse.
    keycloak.give_realm_role(REALM, "etl", IDP_ROLE)
    _grant_warehouse_role(mixed_server, IDP_ROLE, ("create", "write", "drop"))
    issued_before = _metric(mixed_server.url, ISSUED)
    spark, catalog = DRIVERS.catalog(line, mixed_server.url, mixed_server.warehouse, **options)
    namespace = f"idp{line.replace('.', '')}"
    table = f"{catalog}.{namespace}.t"
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
        spark.sql(f"CREATE TABLE {table} (id bigint, name string) USING iceberg")
        spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
        spark.sql(f"INSERT INTO {table} VALUES (3, 'c')")
        assert sorted(row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()) == [1, 2, 3]
        spark.sql(f"DROP TABLE {table} PURGE")
        spark.sql(f"DROP NAMESPACE {catalog}.{namespace}")
    except Exception:
        print(spark.log())
        raise
    # every request was Keycloak's service account's; Growler issued no token of its own
    created = json_lines(mixed_server, operation="createTable")
    assert created and {doc["principal"] for doc in created} == {"service-account-etl"}
    assert _metric(mixed_server.url, ISSUED) == issued_before
    assert _metric(mixed_server.url, 'growler_auth_failures_total{reason="unknown_key"}') == 0


def test_the_console_signs_in_through_the_idp_with_pkce(settings, app, keycloak):
    """The console's sign-in through Keycloak: authorization code with PKCE (a public client),
    a user's password typed at Keycloak's own login form, the session cookie holding the IdP's
    access token; a callback replayed without the state cookie signs nobody in."""
    import re

    import httpx

    from app.edge.factory import create_app

    callback = "http://testserver/ui/oidc/callback"
    audience = {
        "name": "audience",
        "protocol": "openid-connect",
        "protocolMapper": "oidc-audience-mapper",
        "config": {"included.custom.audience": AUDIENCE, "access.token.claim": "true", "id.token.claim": "false"},
    }
    keycloak.admin(
        "POST",
        f"/realms/{REALM}/clients",
        {
            "clientId": "growler-console",
            "enabled": True,
            "publicClient": True,
            "standardFlowEnabled": True,
            "directAccessGrantsEnabled": False,
            "redirectUris": [callback],
            "attributes": {"pkce.code.challenge.method": "S256"},
            "protocolMappers": [audience],
        },
    )
    keycloak.admin(
        "POST",
        f"/realms/{REALM}/users",
        {
            "username": "alice",
            "enabled": True,
            "email": "alice@example.com",
            "emailVerified": True,
            "firstName": "Alice",
            "lastName": "Analyst",
            "credentials": [{"type": "password", "value": "alice-pw", "temporary": False}],
        },
    )
    auth = auth_settings_for_tests(
        oidc_issuer=keycloak.issuer(REALM),
        oidc_audience=AUDIENCE,
        oidc_principal_claim="preferred_username",
        console_oidc_client_id="growler-console",
    )
    console = create_app(settings, auth)
    client = console.test_client()
    assert 'id="sign-in-idp"' in client.get("/ui/sign-in").text
    start = client.get("/ui/oidc/start", params={"next": "/ui/"}, follow_redirects=False)
    assert start.status_code == 303
    location = start.headers["location"]
    assert location.startswith(keycloak.issuer(REALM)) and "code_challenge_method=S256" in location
    with httpx.Client(follow_redirects=True, timeout=30) as browser:
        login = browser.get(location)
        form = re.search(r"<form[^>]*kc-form-login[^>]*>", login.text).group(0)
        action = re.search(r'action="([^"]+)"', form).group(1).replace("&amp;", "&")
        # Keycloak marks its cookies Secure; browsers send them to http://127.0.0.1 (a secure
        # context), httpx does not: sent by hand, as a browser would
        jar = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
        answer = browser.post(
            action,
            data={"username": "alice", "password": "alice-pw"},
            headers={"Cookie": jar},
            follow_redirects=False,
        )
    assert answer.status_code == 302, answer.text[-300:]
    back = answer.headers["location"]
    assert back.startswith(callback + "?")
    done = client.get(back.removeprefix("http://testserver"), follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/ui/"
    assert "HttpOnly" in done.headers["set-cookie"]
    assert 'id="principal">alice<' in client.get("/ui/").text
    replayed = console.test_client().get(back.removeprefix("http://testserver"), follow_redirects=False)
    assert replayed.status_code == 303 and "error=expired" in replayed.headers["location"]
