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
BROWSER_CONSOLE_CLIENT = "growler-console-browser"


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


def test_an_idp_principal_is_a_trusted_engine_through_a_role_its_token_names(settings, mixed_app, keycloak):
    """Read restrictions meet the IdP: a restricted principal known only by its token is refused a
    restricted table's metadata (403) until a role its token's roles claim names is marked a
    trusted engine (setRoleTrustedEngine); then loadTable carries the spec's read-restrictions."""
    from app.composition.services import services_of
    from tests.api.authz_support import wait_for_version
    from tests.api.test_read_restrictions import EU_ONLY, PEOPLE

    admin = mixed_app.test_client(headers={"Authorization": f"Bearer {fetch_token(mixed_app.test_client())}"})
    tag = uuid.uuid4().hex[:8]
    namespace, readers, engines, client = f"idp_{tag}", f"idp-readers-{tag}", f"idp-engines-{tag}", f"engine-{tag}"
    assert admin.post("/v1/test/namespaces", json={"namespace": [namespace]}).status_code == 200
    table = f"/v1/test/namespaces/{namespace}/tables/people"
    created = admin.post(f"/v1/test/namespaces/{namespace}/tables", json={"name": "people", "schema": PEOPLE})
    assert created.status_code == 200, created.text
    management = "/management/v1"
    for role in (readers, engines):
        assert admin.post(f"{management}/roles", json={"name": role}).status_code == 201
    securable = {"type": "table", "warehouse": "test", "namespace": [namespace], "name": "people"}
    grant = {"privilege": "read", "securable": securable}
    assert admin.post(f"{management}/roles/{readers}/grants", json=grant).status_code == 201
    on_table = {"type": "table", "namespace": [namespace], "name": "people"}  # the warehouse: the path's
    restriction = {"securable": on_table, "grantee": {"type": "role", "name": readers}, "row-filter": EU_ONLY}
    restricted = admin.post(f"{management}/warehouses/test/read-restrictions", json=restriction)
    assert restricted.status_code == 200, restricted.text

    keycloak.create_client(REALM, client, "engine-secret", AUDIENCE)
    keycloak.give_realm_role(REALM, client, readers)
    engine = mixed_app.test_client()

    def load() -> object:
        token = keycloak.client_token(REALM, client, "engine-secret")
        return engine.get(table, headers={"Authorization": f"Bearer {token}"})

    refused = load()
    assert refused.status_code == 403, refused.text
    assert "not a trusted engine" in refused.json()["error"]["message"]
    keycloak.give_realm_role(REALM, client, engines)
    assert load().status_code == 403  # holding the role changes nothing until it is marked
    marked = admin.put(f"{management}/roles/{engines}/trusted-engine", json={"trusted-engine": True})
    assert marked.status_code == 200, marked.text
    # until the app's authorizer polled the version the mark bumped (a condition, not a clock)
    wait_for_version(lambda: services_of(mixed_app.app).authorizer._version(), settings.database_url)
    answer = load()
    assert answer.status_code == 200, answer.text
    assert answer.json()["read-restrictions"]["required-row-filter"] == EU_ONLY


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
    """gunicorn accepting its own tokens and Keycloak's (mixed mode), its console signing users in
    through Keycloak too; no test-admin bearer: the clients below authenticate with the IdP only."""
    env = {
        **auth_env_for_tests(),
        "GROWLER_OIDC_ISSUER": keycloak.issuer(REALM),
        "GROWLER_OIDC_AUDIENCE": AUDIENCE,
        "GROWLER_OIDC_PRINCIPAL_CLAIM": "preferred_username",
        "GROWLER_OIDC_ROLES_CLAIM": "realm_access.roles",
        "GROWLER_CONSOLE_OIDC_CLIENT_ID": BROWSER_CONSOLE_CLIENT,  # the browser test's client
    }
    running = start_server(settings, tmp_path_factory.mktemp("gunicorn-mixed"), env, bearer=False)
    try:
        yield running
    finally:
        stop_server(running)


IDP_ROLE = "lakehouse-etl"
ISSUED = 'growler_token_requests_total{grant="client_credentials",outcome="issued"}'


def _admin_headers(server) -> dict[str, str]:
    """The bootstrap admin's bearer header at ``server`` (a token of Growler's own)."""
    import httpx

    token = httpx.post(
        f"{server.url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET},
        timeout=30,
    ).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def _grant_role(server, role: str, privileges: tuple[str, ...], securable: dict[str, object]) -> None:
    """Through the management API, as the bootstrap admin: ``role`` holds ``privileges`` on
    ``securable`` (an existing role or grant is fine: both Spark lines run this)."""
    import httpx

    headers = _admin_headers(server)
    management = f"{server.url}/management/v1"
    response = httpx.post(f"{management}/roles", json={"name": role}, headers=headers, timeout=30)
    assert response.status_code in (201, 409), response.text
    for privilege in privileges:
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
    _grant_role(
        mixed_server, IDP_ROLE, ("create", "write", "drop"), {"type": "warehouse", "warehouse": mixed_server.warehouse}
    )
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
    keycloak.create_console_client(REALM, "growler-console", callback, AUDIENCE)
    keycloak.create_user(REALM, "alice", "alice-pw")
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


BROWSER_ROLE = "idp-browser-readers"
SEEN, UNSEEN = "idp_browser_seen", "idp_browser_unseen"


def test_a_user_signs_in_to_the_console_through_keycloak_in_a_browser(mixed_server, keycloak, browser):
    """The IdP sign-in in a real browser (Chromium, tests/integration/browser_support.py) against
    gunicorn: the sign-in page's IdP link, Keycloak's own login form, back on /ui/ as the user,
    who sees what the realm role in the token's roles claim was granted (one namespace of two, no
    admin page), then signs out. The console client's redirect URI is registered at Keycloak for
    this server's real port; Keycloak runs without a configured hostname (development mode), so
    its issuer is the URL the browser and Growler both use, http://127.0.0.1:<port>."""
    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.integration.browser_support import WAIT_S, assert_accessible

    keycloak.create_console_client(REALM, BROWSER_CONSOLE_CLIENT, f"{mixed_server.url}/ui/oidc/callback", AUDIENCE)
    keycloak.create_user(REALM, "carol", "carol-pw", realm_roles=(BROWSER_ROLE,))
    headers = _admin_headers(mixed_server)
    for namespace in (SEEN, UNSEEN):
        made = httpx.post(
            f"{mixed_server.url}/v1/{mixed_server.warehouse}/namespaces",
            json={"namespace": [namespace]},
            headers=headers,
            timeout=30,
        )
        assert made.status_code == 200, made.text
    securable = {"type": "namespace", "warehouse": mixed_server.warehouse, "namespace": [SEEN]}
    _grant_role(mixed_server, BROWSER_ROLE, ("read",), securable)
    wait = WebDriverWait(browser, WAIT_S)

    # /ui/ sends the browser to the sign-in page, which offers the IdP; Keycloak asks for the password
    browser.get(f"{mixed_server.url}/ui/")
    idp = wait.until(ec.element_to_be_clickable((By.ID, "sign-in-idp")))
    assert_accessible(browser, "sign-in with an IdP")
    idp.click()
    wait.until(ec.presence_of_element_located((By.ID, "kc-form-login")))
    assert browser.current_url.startswith(keycloak.issuer(REALM) + "/")
    browser.find_element(By.ID, "username").send_keys("carol")
    browser.find_element(By.ID, "password").send_keys("carol-pw")
    browser.find_element(By.ID, "kc-login").click()

    # back on the console's first page, signed in as the user, the session cookie HttpOnly
    assert wait.until(ec.presence_of_element_located((By.ID, "principal"))).text == "carol"
    assert browser.current_url == f"{mixed_server.url}/ui/"
    session = browser.get_cookie("growler_session")
    assert session is not None and session["httpOnly"] and session["path"] == "/ui"
    assert browser.get_cookie("growler_oidc") is None  # the sign-in's state is gone
    # what the role's grant allows: its warehouse, one namespace of the two, no admin page
    warehouses = browser.find_elements(By.CSS_SELECTOR, "#warehouses a")
    assert [link.text for link in warehouses] == [mixed_server.warehouse]
    assert browser.find_elements(By.LINK_TEXT, "Admin") == []
    warehouses[0].click()
    listed = wait.until(ec.presence_of_element_located((By.ID, "namespaces")))
    assert [link.text for link in listed.find_elements(By.TAG_NAME, "a")] == [SEEN]

    # sign out: the session cookie gone, the console's pages send to the sign-in page again
    browser.find_element(By.ID, "sign-out").click()
    wait.until(ec.presence_of_element_located((By.ID, "sign-in-idp")))
    assert browser.get_cookie("growler_session") is None
    browser.get(f"{mixed_server.url}/ui/w/{mixed_server.warehouse}")
    wait.until(ec.presence_of_element_located((By.ID, "sign-in-idp")))
    assert browser.current_url.startswith(f"{mixed_server.url}/ui/sign-in")
