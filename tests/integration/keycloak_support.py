"""A real Keycloak (the OIDC identity provider of the authentication tests), started per test session.

The distribution (``org.keycloak:keycloak-quarkus-dist``, pinned in the Makefile) is fetched by
``make keycloak`` into ``.cache/keycloak-<version>``; ``GROWLER_KEYCLOAK_HOME`` names another
one, ``GROWLER_KEYCLOAK_JAVA_HOME`` the JDK (17+). A missing distribution is an error, not a skip.
Keycloak runs in development mode on a free loopback port with an in-memory database; the realm,
clients and keys are made through its admin REST API, as an operator's automation would.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 420
ADMIN_USER = "kc-admin"
ADMIN_PASSWORD = "kc-admin-password"


def keycloak_home() -> Path:
    configured = os.environ.get("GROWLER_KEYCLOAK_HOME")
    if configured:
        return Path(configured)
    found = sorted(glob.glob(str(REPO / ".cache" / "keycloak-*" / "bin" / "kc.sh")))
    if not found:
        raise RuntimeError("Keycloak not found in .cache: run `make keycloak` (or set GROWLER_KEYCLOAK_HOME)")
    return Path(found[-1]).parent.parent


def java_home() -> str:
    configured = os.environ.get("GROWLER_KEYCLOAK_JAVA_HOME") or os.environ.get("GROWLER_SPARK_JAVA_HOME")
    if configured:
        return configured
    found = sorted(glob.glob("/usr/lib/jvm/java-17-openjdk*")) or sorted(glob.glob("/usr/lib/jvm/*"))
    if not found:
        raise RuntimeError("no JDK found for Keycloak: set GROWLER_KEYCLOAK_JAVA_HOME")
    return found[0]


@dataclass
class Keycloak:
    url: str
    process: subprocess.Popen
    log_path: Path

    def admin_token(self) -> str:
        response = httpx.post(
            f"{self.url}/realms/master/protocol/openid-connect/token",
            data={
                "grant_type": "password",
                "client_id": "admin-cli",
                "username": ADMIN_USER,
                "password": ADMIN_PASSWORD,
            },
            timeout=30,
        )
        response.raise_for_status()
        return response.json()["access_token"]

    def admin(self, method: str, path: str, body: Any = None) -> httpx.Response:
        response = httpx.request(
            method,
            f"{self.url}/admin{path}",
            json=body,
            timeout=60,
            headers={"Authorization": f"Bearer {self.admin_token()}"},
        )
        assert response.status_code < 300, (method, path, response.status_code, response.text)
        return response

    def issuer(self, realm: str) -> str:
        return f"{self.url}/realms/{realm}"

    def create_realm(self, realm: str) -> None:
        self.admin("POST", "/realms", {"realm": realm, "enabled": True})

    def create_client(self, realm: str, client_id: str, secret: str, audience: str | None) -> None:
        """A confidential client with a service account (client credentials); with ``audience``,
        the tokens it gets carry that audience (Keycloak's audience mapper)."""
        self.admin(
            "POST",
            f"/realms/{realm}/clients",
            {
                "clientId": client_id,
                "enabled": True,
                "publicClient": False,
                "serviceAccountsEnabled": True,
                "standardFlowEnabled": False,
                "directAccessGrantsEnabled": False,
                "secret": secret,
                "protocolMappers": _audience_mappers(audience),
            },
        )

    def create_console_client(self, realm: str, client_id: str, redirect_uri: str, audience: str) -> None:
        """A public client for a browser's sign-in (authorization code with PKCE S256 only), its
        one redirect URI registered exactly (Keycloak refuses any other), its access tokens
        carrying ``audience``."""
        self.admin(
            "POST",
            f"/realms/{realm}/clients",
            {
                "clientId": client_id,
                "enabled": True,
                "publicClient": True,
                "standardFlowEnabled": True,
                "directAccessGrantsEnabled": False,
                "redirectUris": [redirect_uri],
                "attributes": {"pkce.code.challenge.method": "S256"},
                "protocolMappers": _audience_mappers(audience),
            },
        )

    def create_user(self, realm: str, username: str, password: str, realm_roles: tuple[str, ...] = ()) -> None:
        """A user who signs in with ``password`` at Keycloak's login form (a complete profile and
        a permanent password: no "update your account" page on the way), holding ``realm_roles``."""
        self.admin(
            "POST",
            f"/realms/{realm}/users",
            {
                "username": username,
                "enabled": True,
                "email": f"{username}@example.com",
                "emailVerified": True,
                "firstName": username.capitalize(),
                "lastName": "Tester",
                "credentials": [{"type": "password", "value": password, "temporary": False}],
            },
        )
        if realm_roles:
            (user,) = self.admin("GET", f"/realms/{realm}/users?username={username}&exact=true").json()
            roles = [self._realm_role(realm, role) for role in realm_roles]
            self.admin("POST", f"/realms/{realm}/users/{user['id']}/role-mappings/realm", roles)

    def _realm_role(self, realm: str, role: str) -> dict[str, Any]:
        """The realm role's representation (the role made first if missing)."""
        if (
            httpx.get(
                f"{self.url}/admin/realms/{realm}/roles/{role}",
                headers={"Authorization": f"Bearer {self.admin_token()}"},
                timeout=60,
            ).status_code
            == 404
        ):
            self.admin("POST", f"/realms/{realm}/roles", {"name": role})
        return self.admin("GET", f"/realms/{realm}/roles/{role}").json()

    def give_realm_role(self, realm: str, client_id: str, role: str) -> None:
        """The client's service account holds realm role ``role`` (created if missing): its tokens
        then name it in ``realm_access.roles``, the claim Growler maps to its own roles."""
        representation = self._realm_role(realm, role)
        (client,) = self.admin("GET", f"/realms/{realm}/clients?clientId={client_id}").json()
        user = self.admin("GET", f"/realms/{realm}/clients/{client['id']}/service-account-user").json()
        self.admin("POST", f"/realms/{realm}/users/{user['id']}/role-mappings/realm", [representation])

    def client_token(self, realm: str, client_id: str, secret: str) -> str:
        response = httpx.post(
            f"{self.issuer(realm)}/protocol/openid-connect/token",
            data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
            timeout=30,
        )
        response.raise_for_status()
        return response.json()["access_token"]

    def rotate_keys(self, realm: str) -> None:
        """A new RSA key with a higher priority than every other: it signs from now on."""
        realm_id = self.admin("GET", f"/realms/{realm}").json()["id"]
        self.admin(
            "POST",
            f"/realms/{realm}/components",
            {
                "name": f"rotated-{time.monotonic_ns()}",
                "providerId": "rsa-generated",
                "providerType": "org.keycloak.keys.KeyProvider",
                "parentId": realm_id,
                "config": {
                    "priority": [str(1000 + int(time.time()) % 100000)],
                    "keySize": ["2048"],
                    "active": ["true"],
                    "enabled": ["true"],
                    "algorithm": ["RS256"],
                },
            },
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _audience_mappers(audience: str | None) -> list[dict[str, Any]]:
    """Keycloak's audience mapper: the client's access tokens carry ``audience`` (none: no mapper)."""
    if not audience:
        return []
    config = {"included.custom.audience": audience, "access.token.claim": "true", "id.token.claim": "false"}
    return [
        {"name": "audience", "protocol": "openid-connect", "protocolMapper": "oidc-audience-mapper", "config": config}
    ]


def launch_keycloak(tmp_dir: Path) -> Keycloak:
    """Start Keycloak's process and return at once (``wait_until_ready`` waits for it)."""
    from scripts.processes import free_port

    home = keycloak_home()
    port, management = free_port(), free_port()
    env = dict(
        os.environ,
        JAVA_HOME=java_home(),
        KC_BOOTSTRAP_ADMIN_USERNAME=ADMIN_USER,
        KC_BOOTSTRAP_ADMIN_PASSWORD=ADMIN_PASSWORD,
        JAVA_OPTS_APPEND="-Xms64m -Xmx512m",
    )
    log_path = tmp_dir / "keycloak.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [
                str(home / "bin" / "kc.sh"),
                "start-dev",
                "--db=dev-mem",
                "--http-host=127.0.0.1",
                f"--http-port={port}",
                f"--http-management-port={management}",
                "--cache=local",
            ],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Keycloak(f"http://127.0.0.1:{port}", process, log_path)


def wait_until_ready(keycloak: Keycloak) -> Keycloak:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if keycloak.process.poll() is not None:
            log = keycloak.log_path.read_text(errors="replace")
            raise RuntimeError(f"Keycloak exited with {keycloak.process.returncode}:\n{log}")
        try:
            discovery = f"{keycloak.url}/realms/master/.well-known/openid-configuration"
            if httpx.get(discovery, timeout=2).status_code == 200:
                return keycloak
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    keycloak.stop()
    log = keycloak.log_path.read_text(errors="replace")
    raise RuntimeError(f"Keycloak did not start within {START_TIMEOUT_S} s:\n{log}")


class KeycloakLauncher:
    """Keycloak started ahead of the tests that use it: its first start takes tens of seconds
    (Quarkus re-augments for the dev profile), which it spends while earlier tests run.

    ``prestart`` launches one in the background (the integration conftest calls it after
    collection when a test uses Keycloak); ``take`` hands it over, ready, to the fixture that owns
    it from then on (or launches one then); ``stop`` stops one that was never taken.
    """

    def __init__(self) -> None:
        self._launched: Keycloak | None = None

    def prestart(self) -> None:
        if self._launched is None:
            self._launched = launch_keycloak(Path(tempfile.mkdtemp(prefix="growler-keycloak-")))

    def take(self) -> Keycloak:
        self.prestart()
        keycloak, self._launched = self._launched, None
        return wait_until_ready(keycloak)

    def stop(self) -> None:
        if self._launched is not None:
            self._launched.stop()
            self._launched = None


KEYCLOAK = KeycloakLauncher()
