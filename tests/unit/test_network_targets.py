"""The webhook rule (app/rules/network_targets.py): which addresses a webhook may be delivered to,
by default and with networks an operator allowed; and its setting, refused at start-up when malformed."""

from __future__ import annotations

import ipaddress

import pytest

from app.ground.settings import Settings
from app.rules.network_targets import TargetRule, address_of, parse_networks

DEFAULT = TargetRule()
BASE_ENV = {"GROWLER_DATABASE_URL": "postgresql://h/db", "GROWLER_WAREHOUSE_LOCATION": "file:///tmp/w"}
REFUSED = {
    "127.0.0.1": "a loopback address",
    "127.255.0.9": "a loopback address",
    "::1": "a loopback address",
    "::ffff:127.0.0.1": "a loopback address",  # IPv4-mapped: what it maps to is checked
    "169.254.169.254": "a link-local address (the cloud's metadata endpoint is one)",
    "fe80::1%eth0": "a link-local address (the cloud's metadata endpoint is one)",  # a scope id
    "10.0.0.1": "a private address",
    "172.31.255.255": "a private address",
    "192.168.0.1": "a private address",
    "fc00::1": "a private address",
    "100.64.0.1": "a reserved or shared address, not a global one",
    "0.0.0.0": "an unspecified address",
    "::": "an unspecified address",
    "224.0.0.251": "a multicast address",
    "ff02::1": "a multicast address",
    "240.0.0.1": "a private address",  # reserved (Python counts it among the private ones)
}


@pytest.mark.parametrize("text", list(REFUSED))
def test_by_default_only_global_unicast_addresses_are_targets(text):
    assert DEFAULT.refusal(address_of(text), 80) == REFUSED[text]


@pytest.mark.parametrize("text", ["8.8.8.8", "192.0.43.10", "2001:4860:4860::8888", "::ffff:8.8.8.8"])
def test_a_global_address_is_a_target(text):
    assert DEFAULT.refusal(address_of(text), 443) is None


def test_an_allowed_network_lifts_the_refusal_for_its_addresses_only():
    rule = TargetRule(parse_networks(["10.1.0.0/16", "127.0.0.1", "fd00::/8"]))
    assert rule.refusal(address_of("10.1.2.3"), 80) is None
    assert rule.refusal(address_of("127.0.0.1"), 80) is None
    assert rule.refusal(address_of("::ffff:127.0.0.1"), 80) is None
    assert rule.refusal(address_of("fd12::1"), 80) is None
    assert rule.refusal(address_of("10.2.0.1"), 80) == "a private address"
    assert rule.refusal(address_of("127.0.0.2"), 80) == "a loopback address"
    assert rule.refusal(address_of("169.254.169.254"), 80) is not None


def test_the_database_endpoint_is_refused_always_and_its_host_by_default():
    database = frozenset({(ipaddress.ip_address("10.1.0.5"), 5432), (ipaddress.ip_address("192.0.43.10"), 5432)})
    allowing = TargetRule(parse_networks(["10.0.0.0/8"]), database)
    assert allowing.refusal(address_of("10.1.0.5"), 5432) == "the catalog's own database (port 5432)"
    assert allowing.refusal(address_of("10.1.0.5"), 8080) is None  # its network allowed: another port is
    by_default = TargetRule((), database)
    assert by_default.refusal(address_of("192.0.43.10"), 8080) == "the catalog database's host"
    assert by_default.refusal(address_of("192.0.43.11"), 5432) is None


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "not-a-network", "10.0.0.0/8 , x"])
def test_a_malformed_allowed_network_fails_at_start_up(bad):
    env = {**BASE_ENV, "GROWLER_WEBHOOK_ALLOWED_NETWORKS": bad}
    with pytest.raises(ValueError, match="GROWLER_WEBHOOK_ALLOWED_NETWORKS"):
        Settings.from_env(env)
    with pytest.raises(ValueError, match="GROWLER_WEBHOOK_ALLOWED_NETWORKS"):
        parse_networks(bad.split(","))


def test_the_setting_is_read_as_a_list():
    env = {**BASE_ENV, "GROWLER_WEBHOOK_ALLOWED_NETWORKS": " 10.0.0.0/8, fd00::/8 "}
    assert Settings.from_env(env).webhook_allowed_networks == ("10.0.0.0/8", "fd00::/8")
    assert Settings.from_env(BASE_ENV).webhook_allowed_networks == ()
