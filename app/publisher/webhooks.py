"""Webhook targets: where a webhook sink may send its events, checked when the sink is created
and again at every delivery, and the delivery itself (app/publisher/service.py runs it).

Which addresses are targets is the rule of app/rules/network_targets.py (no loopback, link-local,
private, ... address, nor the database's, unless ``GROWLER_WEBHOOK_ALLOWED_NETWORKS`` names it).
What this module adds is where the rule is applied, so that a name cannot be made to point
elsewhere between the check and the request:

- **at creation** (``WebhookGuard.check_url``): the URL's host is resolved and every address it
  resolves to must be a target: a 400 naming the address otherwise (a host that does not
  resolve is refused too: nothing could be checked);
- **at each delivery** (``WebhookTarget.send``): the host is resolved again (DNS may have changed
  since), every address checked again, and the connection made to the checked address itself -
  not to the name, which a second lookup could answer differently - and the address the socket
  is connected to checked once more. HTTPS still verifies the certificate for the URL's host name.
- **no redirects**: a 3xx is a failed delivery (retried, then a dead letter), never followed:
  following one would send the event to a target nobody checked.

A webhook is delivered directly, never through an HTTP proxy of the environment: a proxy would
resolve the name itself, past the check.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from app.ground.errors import BadRequest
from app.rules.network_targets import ALLOWED_NETWORKS_SETTING, IPNetwork, TargetRule, address_of, parse_networks
from storage.db import database_endpoints

SIGNATURE_HEADER = "X-Growler-Signature"
DEFAULT_PORTS = {"http": 80, "https": 443}
DATABASE_ADDRESSES_TTL_S = 60.0  # the database's host names resolved again after this long

Resolver = Callable[[str, int], Sequence[str]]  # (host, port) -> the addresses it resolves to


class DeliveryFailed(Exception):
    pass


class TargetRefused(Exception):
    """A webhook's host resolves to an address that is no target (the message says which and why)."""


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (TCP), in the resolver's order, without repeats."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class WebhookGuard:
    """The rule of one installation, with the names resolved: the allowed networks and the
    database's endpoints (its hosts from ``GROWLER_DATABASE_URL``, resolved again every minute)."""

    def __init__(
        self,
        allowed_networks: Sequence[str] | Sequence[IPNetwork] = (),
        database_url: str = "",
        resolver: Resolver = resolve,
    ) -> None:
        given = [str(network) for network in allowed_networks]
        self.allowed_networks = parse_networks(given)
        self.database = database_endpoints(database_url) if database_url else []
        self.resolver = resolver
        self._lock = threading.Lock()
        self._database_rule: tuple[float, TargetRule] | None = None

    def rule(self) -> TargetRule:
        with self._lock:
            held = self._database_rule
            if held is not None and time.monotonic() - held[0] < DATABASE_ADDRESSES_TTL_S:
                return held[1]
        endpoints = set()
        for host, port in self.database:
            try:
                endpoints |= {(address_of(address), port) for address in self.resolver(host, port)}
            except OSError:  # the database's name does not resolve from here: nothing to compare
                pass
        made = TargetRule(self.allowed_networks, frozenset(endpoints))
        with self._lock:
            self._database_rule = (time.monotonic(), made)
        return made

    def addresses(self, host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to, each a target; ``TargetRefused`` when one is not
        (one refused address refuses the name: which one a connection would take is the resolver's
        choice), or when the name does not resolve."""
        try:
            found = self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise TargetRefused(f"the webhook's host {host} does not resolve ({type(exc).__name__})") from exc
        if not found:
            raise TargetRefused(f"the webhook's host {host} does not resolve")
        rule = self.rule()
        for address in found:
            why = rule.refusal(address_of(address), port)
            if why is not None:
                raise TargetRefused(f"the webhook's host {host} resolves to {address_of(address)}, {why}")
        return list(found)

    def check_peer(self, sock: socket.socket, host: str, port: int) -> None:
        """The address a socket is connected to, checked again (what was checked is what was reached)."""
        peer = address_of(str(sock.getpeername()[0]))
        why = self.rule().refusal(peer, port)
        if why is not None:
            raise TargetRefused(f"the webhook's host {host} was reached at {peer}, {why}")

    def check_url(self, url: str) -> None:
        """At creation: a 400 that says what to do when the URL's host is no target."""
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port or DEFAULT_PORTS.get(parts.scheme, 80)
        try:
            self.addresses(host, port)
        except TargetRefused as exc:
            raise BadRequest(
                f"Refused webhook target: {exc}. Growler delivers webhooks to global addresses only; "
                f"an operator allows private networks by naming them in {ALLOWED_NETWORKS_SETTING}"
            ) from exc


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to one checked address (the Host header still names the URL's host)."""

    def __init__(self, host: str, port: int, address: str, guard: WebhookGuard, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address, self.guard = address, guard

    def _socket(self) -> socket.socket:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        try:
            self.guard.check_peer(sock, self.host, self.port)
        except TargetRefused:
            sock.close()
            raise
        return sock

    def connect(self) -> None:
        self.sock = self._socket()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    """The same over TLS: the certificate verified for the URL's host name (SNI too)."""

    default_port = http.client.HTTPS_PORT  # the Host header names a port only when it is another

    def __init__(self, host: str, port: int, address: str, guard: WebhookGuard, timeout: float) -> None:
        super().__init__(host, port, address, guard, timeout)
        self.context = ssl.create_default_context()

    def connect(self) -> None:
        self.sock = self.context.wrap_socket(self._socket(), server_hostname=self.host)


class WebhookTarget:
    """One webhook sink's endpoint: each event POSTed to a checked address, signed when the sink
    has a secret (``X-Growler-Signature: sha256=<HMAC of the body>``)."""

    def __init__(self, url: str, secret: str | None, guard: WebhookGuard, timeout_s: float = 5.0) -> None:
        self.url, self.secret, self.guard, self.timeout_s = url, secret, guard, timeout_s
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or DEFAULT_PORTS["https" if self.https else "http"]
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def send(self, subject_: str, event_id: str, headers: dict[str, str], body: bytes) -> None:
        headers = {**headers, "User-Agent": "growler-events"}
        if self.secret:
            headers[SIGNATURE_HEADER] = signature(self.secret, body)
        try:
            address = self.guard.addresses(self.host, self.port)[0]
        except TargetRefused as exc:
            raise DeliveryFailed(f"refused target: {exc}") from exc
        kind = _PinnedHTTPSConnection if self.https else _PinnedHTTPConnection
        connection = kind(self.host, self.port, address, self.guard, self.timeout_s)
        try:
            connection.request("POST", self.path, body=body, headers=headers)
            status = connection.getresponse().status
        except TargetRefused as exc:
            raise DeliveryFailed(f"refused target: {exc}") from exc
        except (OSError, http.client.HTTPException) as exc:  # TimeoutError and ssl errors are OSErrors
            raise DeliveryFailed(type(exc).__name__) from exc
        finally:
            connection.close()
        if 300 <= status < 400:
            raise DeliveryFailed(f"HTTP {status} (redirects are not followed)")
        if not 200 <= status < 300:
            raise DeliveryFailed(f"HTTP {status}")

    def close(self) -> None:
        pass
