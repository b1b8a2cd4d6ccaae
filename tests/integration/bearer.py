"""The test admin's token on the tests' own HTTP calls to the servers they start (one instance:
pytest may load conftest.py twice, as ``conftest`` and as ``tests.integration.conftest``)."""

from __future__ import annotations

import time

import httpx

from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET


class BearerForTestServers:
    """The test admin's bearer token on every httpx request to a server the tests started.

    Every server started here authenticates, as ``make run`` does; the tests' own HTTP calls (raw
    httpx, the commit-barrier proxy's forwards, nginx in front) speak for the test admin unless
    they set an ``Authorization`` header themselves (the authentication tests do). One token per
    server, fetched with client credentials and renewed well before it expires. Installed once
    for the session by wrapping ``httpx.Client.send``/``AsyncClient.send``: one place instead of
    a header at a hundred call sites.
    """

    RENEW_AFTER_S = 600.0

    def __init__(self) -> None:
        self._origins: set[str] = set()
        self._tokens: dict[str, tuple[str, float]] = {}
        self._send = httpx.Client.send
        self._send_async = httpx.AsyncClient.send

    def register(self, url: str) -> None:
        """Requests to ``url`` (scheme://host:port) carry a token from its own token endpoint."""
        self._origins.add(url.rstrip("/"))

    def install(self) -> None:
        bearer = self

        def send(client, request, **kwargs):
            bearer.authorize(request)
            return bearer._send(client, request, **kwargs)

        async def send_async(client, request, **kwargs):
            bearer.authorize(request)
            return await bearer._send_async(client, request, **kwargs)

        httpx.Client.send = send
        httpx.AsyncClient.send = send_async

    def uninstall(self) -> None:
        httpx.Client.send = self._send
        httpx.AsyncClient.send = self._send_async

    def authorize(self, request: httpx.Request) -> None:
        if "authorization" in request.headers or request.url.path.endswith("/oauth/tokens"):
            return
        origin = f"{request.url.scheme}://{request.url.netloc.decode()}"
        if origin in self._origins:
            request.headers["Authorization"] = f"Bearer {self.token(origin)}"

    def token(self, origin: str) -> str:
        # No entry: never fetched. (A default of fetched-at-0 looked fresh on a machine up for less
        # than RENEW_AFTER_S: the monotonic clock counts from boot.)
        known = self._tokens.get(origin)
        token = known[0] if known else ""
        if known is None or time.monotonic() - known[1] > self.RENEW_AFTER_S:
            request = httpx.Request(
                "POST",
                f"{origin}/v1/oauth/tokens",
                data={
                    "grant_type": "client_credentials",
                    "client_id": TEST_CLIENT_ID,
                    "client_secret": TEST_CLIENT_SECRET,
                    "scope": "catalog",
                },
            )
            with httpx.Client(timeout=30) as client:
                response = self._send(client, request)
            response.raise_for_status()
            token = response.json()["access_token"]
            self._tokens[origin] = (token, time.monotonic())
        return token


BEARER = BearerForTestServers()
