"""Which network addresses a webhook may be delivered to (app/publisher/webhooks.py checks every address a
webhook's host resolves to, at creation and again at each delivery, and the one connected to).

A webhook is a URL an administrator hands Growler, and Growler then sends requests there from
inside its own network: without a rule it reaches what only Growler can reach - its own loopback
services, the cloud's metadata endpoint (169.254.169.254: instance credentials), the cluster's
private addresses, its own PostgreSQL. So by default only global unicast addresses are targets:
loopback, link-local (169.254/16, fe80::/10), private (RFC 1918, fc00::/7, 100.64/10 and the other
non-global ranges), unspecified, multicast and reserved addresses are refused, and so is any address
of the catalog database's hosts. An operator who runs receivers on a private network names it in
``GROWLER_WEBHOOK_ALLOWED_NETWORKS`` (CIDRs); an address in a named network is allowed whatever its
class. The database's own endpoint (its address and port) is refused even then: no webhook has
anything to say to PostgreSQL.

Pure: the addresses are resolved by the caller.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ALLOWED_NETWORKS_SETTING = "GROWLER_WEBHOOK_ALLOWED_NETWORKS"


def parse_networks(texts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """The networks of ``GROWLER_WEBHOOK_ALLOWED_NETWORKS`` (``10.0.0.0/8``, ``192.0.2.7``, ``fd00::/8``);
    a ValueError naming the setting and the entry that is none."""
    networks = []
    for text in texts:
        try:
            networks.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"{ALLOWED_NETWORKS_SETTING}: {text!r} is not an address or a network (CIDR)") from exc
    return tuple(networks)


def address_of(text: str) -> IPAddress:
    """An address as a socket gives it (an IPv6 scope id dropped), an IPv4-mapped IPv6 address
    (``::ffff:127.0.0.1``) as the IPv4 address it is."""
    address = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_class(address: IPAddress) -> str | None:
    """What makes an address no target by default, in words; None for a global unicast address."""
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (the cloud's metadata endpoint is one)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved or shared address, not a global one"
    return None


@dataclass(frozen=True)
class TargetRule:
    """The rule for one installation: the networks the operator allowed, and the database's
    endpoints (each resolved address with its port)."""

    allowed_networks: tuple[IPNetwork, ...] = ()
    database: Collection[tuple[IPAddress, int]] = ()

    def refusal(self, address: IPAddress, port: int) -> str | None:
        """What makes ``address:port`` no webhook target, in words ("a loopback address"), or None."""
        address = address_of(str(address))
        if (address, port) in self.database:
            return f"the catalog's own database (port {port})"
        if any(address in network for network in self.allowed_networks):
            return None
        found = address_class(address)
        if found is None and any(address == known for known, _ in self.database):
            return "the catalog database's host"
        return found
