"""Push delivery to webhooks (app/publisher/service.py), configured through the management API: a receiver
that fails, times out and recovers gets every event once acknowledged, in order, signed; a
receiver that keeps failing leaves dead letters an administrator lists and replays; the example
receiver (examples/webhook_receiver.py) verifies signatures as written. Where a webhook may go
(app/publisher/webhooks.py): by default no loopback, link-local, private or database address, refused with a
400 at creation and checked again at every delivery, redirects never followed. (The suite's
settings allow loopback, where its receivers listen: tests/conftest.py.)"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.composition.services import services_of
from app.publisher.webhooks import DeliveryFailed, TargetRefused, WebhookGuard, WebhookTarget
from scripts.processes import free_port
from storage.db import database_endpoints
from tests.api.tables_support import PREFIX, append, create_request, table_url, tables_url
from tests.api.webhook_support import Script, wait_for

pytestmark = pytest.mark.usefixtures("clean_catalog")
SINKS = "/management/v1/event-sinks"
SECRET = "a-webhook-secret-of-some-length"
ROOT = Path(__file__).resolve().parents[2]


def changes(client) -> list[dict]:
    """Three changes of the warehouse; their events as the feed serves them."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    assert append(client, table_url("t"), 7, 1, None).status_code == 200
    return client.post(f"{PREFIX}/events", json={}).json()["events"]


def test_a_webhook_that_fails_times_out_and_recovers_gets_every_event_in_order(client, receiver):
    url, scripts = receiver
    scripts["/ok"] = script = Script(500, "hang", 503)  # then 204 from the fourth request on
    body = {"name": "hook", "kind": "webhook", "url": f"{url}/ok", "secret": SECRET, "max-attempts": 5}
    body["filters"] = {"warehouses": ["test"]}
    created = client.post(SINKS, json=body)
    assert created.status_code == 201, created.text
    assert created.json()["signed"] is True and "secret" not in created.json()
    events = changes(client)
    script.wait_until(lambda: len(script.received) >= 3)
    delivered = [event for event, _, _ in script.received]
    for _, raw, signature in script.received:  # signed with the sink's secret, over the body
        assert signature == "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    assert [e["id"] for e in delivered] == [e["event-id"] for e in events]  # in order, each once
    first = delivered[0]
    assert (first["specversion"], first["source"], first["type"]) == (
        "1.0",
        "/growler/test",
        "org.apache.iceberg.catalog.create-namespace",
    )
    commit = delivered[2]
    assert commit["subject"] == "db.t" and commit["datacontenttype"] == "application/json"
    snapshot = next(u for u in commit["data"]["operation"]["updates"] if u["action"] == "add-snapshot")["snapshot"]
    assert snapshot["snapshot-id"] == 7 and [int(e["sequence"]) for e in delivered] == sorted(
        int(e["sequence"]) for e in delivered
    )
    assert script.requests == 6  # three failures (500, the timeout, 503), then one request per event
    listed = client.get(SINKS).json()["event-sinks"]
    assert [s["name"] for s in listed] == ["hook"]
    assert client.get(f"{SINKS}/hook/dead-letters").json() == {"dead-letters": []}
    assert client.delete(f"{SINKS}/hook").status_code == 204


def test_dead_letters_are_listed_and_replayed(client, receiver):
    url, scripts = receiver
    scripts["/down"] = script = Script(*[500] * 6)  # two attempts per event: three events die
    body = {"name": "down", "kind": "webhook", "url": f"{url}/down", "secret": SECRET, "max-attempts": 2}
    assert client.post(SINKS, json=body).status_code == 201
    events = changes(client)
    wait_for(lambda: len(client.get(f"{SINKS}/down/dead-letters").json()["dead-letters"]) == 3)
    dead = client.get(f"{SINKS}/down/dead-letters").json()["dead-letters"]
    assert [d["event-id"] for d in dead] == [e["event-id"] for e in events]
    assert {(d["attempts"], d["last-error"]) for d in dead} == {(2, "HTTP 500")}
    assert script.received == []
    assert client.post(f"{SINKS}/down/dead-letters/replay").status_code == 204  # the receiver is back
    wait_for(lambda: client.get(f"{SINKS}/down/dead-letters").json()["dead-letters"] == [])
    assert [event["id"] for event, _, _ in script.received] == [e["event-id"] for e in events]


def test_sinks_are_for_administrators_and_bad_ones_are_400(client, principals):
    caller = principals.new("not-admin")
    assert caller.client.post(SINKS, json={"name": "x", "kind": "webhook", "url": "http://h/"}).status_code == 403
    assert caller.client.get(SINKS).status_code == 403
    for bad in (
        {"name": "x", "kind": "webhook", "url": "ftp://h/"},
        {"name": "x", "kind": "nats", "url": "http://h/"},
        {"name": "x", "kind": "nats", "url": "nats://h:4222", "secret": SECRET},
        {"name": "env-x", "kind": "webhook", "url": "http://h/"},
        {"name": "x", "kind": "kafka", "url": "http://h/"},
        {"name": "x", "kind": "nats", "url": "nats://h:4222", "filters": {"changes": False}},  # delivers nothing
    ):
        assert client.post(SINKS, json=bad).status_code == 400, bad
    # the suite's default app records no audit trail: a sink of it would export nothing
    off = client.post(SINKS, json={"name": "x", "kind": "nats", "url": "nats://h:4222", "filters": {"audit": True}})
    assert off.status_code == 400, off.text
    assert "GROWLER_AUDIT_TRAIL=on" in off.json()["error"]["message"]
    assert client.get(SINKS).json()["event-sinks"] == []
    assert client.get(f"{SINKS}/none/dead-letters").status_code == 404


def test_kafka_sinks_keep_their_password_secret_and_bad_ones_are_400(client, db):
    """A Kafka sink (its delivery: tests/integration/test_event_kafka.py): SASL password sealed at
    rest, never returned; malformed servers, topics and security settings refused, nothing written."""
    kafka = {"url": "kafka://b1.example:9092,[::1]:9093", "kind": "kafka"}
    sasl = {"security-protocol": "sasl_ssl", "sasl-mechanism": "SCRAM-SHA-512", "sasl-username": "growler"}
    for bad in (
        {**kafka, "url": "kafka://b1.example"},  # no port
        {**kafka, "url": "kafka://b1.example:99999"},
        {**kafka, "url": "kafka://b1.example:9092/path"},
        {**kafka, "url": "nats://b1.example:9092", "kafka": {"topic": "t"}},
        kafka,  # no settings
        {**kafka, "kafka": {"topic": "events/{warehouse}"}},
        {**kafka, "kafka": {"topic": "{warehouse}" * 30}},
        {**kafka, "kafka": {"topic": "t", "security-protocol": "sasl_ssl"}},  # no mechanism, user, password
        {**kafka, "kafka": {"topic": "t", "sasl-username": "u", "sasl-password": "p"}},  # SASL over plaintext
        {
            **kafka,
            "kafka": {
                "topic": "t",
                **sasl,
                "security-protocol": "sasl_plaintext",
                "sasl-mechanism": "PLAIN",
                "sasl-password": "p",
            },
        },  # the password in the clear
        {**kafka, "kafka": {"topic": "t", "ssl-ca-pem": "-----BEGIN CERTIFICATE-----"}},  # TLS off
        {**kafka, "kafka": {"topic": "t", "security-protocol": "ssl", "ssl-ca-pem": "not a certificate"}},
        {**kafka, "kafka": {"topic": "t"}, "secret": SECRET},
        {"kind": "webhook", "url": "http://h/", "kafka": {"topic": "t"}},
    ):
        assert client.post(SINKS, json={"name": "k", **bad}).status_code == 400, bad
    assert client.get(SINKS).json() == {"event-sinks": []}
    body = {"name": "k", **kafka, "kafka": {"topic": "growler.{warehouse}", **sasl, "sasl-password": "pa55-w0rd-kafka"}}
    made = client.post(SINKS, json=body)
    assert made.status_code == 201, made.text
    view = {**body["kafka"], "sasl-password-set": True}
    del view["sasl-password"]
    assert made.json()["kafka"] == view and made.json()["signed"] is False
    assert client.get(SINKS).json()["event-sinks"][0]["kafka"] == view
    # sealed: the password is not in the row as written
    secret, options = db.execute("SELECT secret, options FROM event_sink WHERE name = 'k'").fetchone()
    assert b"pa55-w0rd-kafka" not in bytes(secret) and "pa55" not in json.dumps(options)
    assert client.delete(f"{SINKS}/k").status_code == 204


def test_the_example_receiver_verifies_signatures(client):
    port = free_port()
    env = {"GROWLER_WEBHOOK_SECRET": SECRET, "PATH": "/usr/bin:/bin"}
    example = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "webhook_receiver.py"), str(port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        body = {"name": "example", "kind": "webhook", "url": f"http://127.0.0.1:{port}/", "secret": SECRET}
        assert client.post(SINKS, json=body).status_code == 201
        changes(client)
        lines = [example.stdout.readline().split() for _ in range(3)]
        assert [line[1] for line in lines] == ["create-namespace", "create-table", "update-table"]
        assert lines[2][2] == "db.t"
        forged = urllib.request.Request(
            f"http://127.0.0.1:{port}/", data=b"{}", headers={"X-Growler-Signature": "sha256=00"}, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=5)
        assert refused.value.code == 401
    finally:
        example.kill()
        example.wait()


REFUSED_BY_DEFAULT = {
    "http://127.0.0.1:9/": "127.0.0.1, a loopback address",
    "http://localhost:9/": "a loopback address",  # a name: what it resolves to is checked
    "http://2130706433:9/": "127.0.0.1, a loopback address",  # 127.0.0.1 written as one number
    "http://[::1]:9/": "::1, a loopback address",
    "http://[::ffff:127.0.0.1]:9/": "127.0.0.1, a loopback address",  # IPv4-mapped
    "http://169.254.169.254/latest/meta-data/": "169.254.169.254, a link-local address",
    "http://[fe80::1]/": "fe80::1, a link-local address",
    "http://10.1.2.3/": "10.1.2.3, a private address",
    "http://172.16.0.1:8080/": "172.16.0.1, a private address",
    "https://192.168.1.10/": "192.168.1.10, a private address",
    "http://[fd00::1]/": "fd00::1, a private address",
    "http://100.64.0.1/": "100.64.0.1, a reserved or shared address",
    "http://0.0.0.0:9/": "0.0.0.0, an unspecified address",
    "http://224.0.0.1/": "224.0.0.1, a multicast address",
    "http://host.invalid/": "does not resolve",
}


@pytest.fixture
def default_app(settings, clean_catalog):
    """An app with the product's default webhook rule (no network allowed); its publisher stopped
    at once, so that the suite's app keeps delivering (its rule allows the receivers' loopback)."""
    from app.edge.factory import create_app
    from tests.conftest import authenticated

    app = authenticated(create_app(dataclasses.replace(settings, webhook_allowed_networks=())))
    services_of(app.app).publisher.stop()
    return app


@pytest.mark.parametrize("url", list(REFUSED_BY_DEFAULT))
def test_by_default_loopback_link_local_private_and_unresolvable_targets_are_400(default_app, db, url):
    answer = default_app.test_client().post(SINKS, json={"name": "hook", "kind": "webhook", "url": url})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "BadRequestException"
    assert error["message"].startswith("Refused webhook target: the webhook's host ")
    assert REFUSED_BY_DEFAULT[url] in error["message"]
    assert "GROWLER_WEBHOOK_ALLOWED_NETWORKS" in error["message"]  # what an operator does about it
    assert db.execute("SELECT count(*) FROM event_sink").fetchone()[0] == 0


def test_the_database_is_no_target_even_where_its_network_is_allowed(client, db, settings):
    """The suite allows loopback, where its PostgreSQL listens too: its port stays refused."""
    [(host, port)] = database_endpoints(settings.database_url)
    answer = client.post(SINKS, json={"name": "db", "kind": "webhook", "url": f"http://{host}:{port}/"})
    assert answer.status_code == 400, answer.text
    assert f"resolves to {host}, the catalog's own database (port {port})" in answer.json()["error"]["message"]
    assert db.execute("SELECT count(*) FROM event_sink").fetchone()[0] == 0


def test_by_default_the_database_host_is_refused_on_any_port():
    """Its address is refused whatever the port (here a global address, so no other rule applies)."""
    guard = WebhookGuard(database_url="postgresql://u@db.example:5432/c", resolver=lambda host, port: ["192.0.43.10"])
    with pytest.raises(TargetRefused, match="192.0.43.10, the catalog database's host"):
        guard.addresses("hooks.example", 443)


def _post(target: WebhookTarget) -> None:
    target.send("s", "id", {"Content-Type": "application/cloudevents+json"}, b"{}")


def test_each_delivery_resolves_and_checks_again_and_connects_to_the_checked_address(receiver):
    """A sink's host is checked when it is made, but DNS may answer otherwise later: each delivery
    resolves it again and checks every address, and connects to the address it checked (no
    second lookup: here the name resolves nowhere but through the guard's resolver)."""
    url, scripts = receiver
    port = int(url.rsplit(":", 1)[1])
    scripts["/hook"] = script = Script()
    answers = iter([["127.0.0.1"], ["169.254.169.254"], ["127.0.0.1", "10.0.0.7"]])
    guard = WebhookGuard(("127.0.0.0/8",), resolver=lambda host, port: next(answers))
    target = WebhookTarget(f"http://hooks.invalid:{port}/hook", None, guard)
    _post(target)  # 127.0.0.1: allowed here
    assert script.requests == 1 and script.hosts == [f"hooks.invalid:{port}"]
    with pytest.raises(DeliveryFailed, match="refused target: .*169.254.169.254, a link-local address"):
        _post(target)  # the name now points at the metadata endpoint
    with pytest.raises(DeliveryFailed, match="10.0.0.7, a private address"):
        _post(target)  # one refused address refuses the name
    assert script.requests == 1


def test_by_default_a_delivery_to_loopback_is_refused_before_any_connection(receiver):
    """The rule holds at delivery whatever the sink's history (made under another rule, another DNS)."""
    url, scripts = receiver
    scripts["/hook"] = script = Script()
    with pytest.raises(DeliveryFailed, match="refused target: .*127.0.0.1, a loopback address"):
        _post(WebhookTarget(f"{url}/hook", None, WebhookGuard()))
    assert script.requests == 0
    # the address a socket reached is checked too (what a connection made elsewhere would meet)
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as sock:
        with pytest.raises(TargetRefused, match="was reached at 127.0.0.1, a loopback address"):
            WebhookGuard().check_peer(sock, "hooks.example", 80)


def test_a_redirect_is_a_failed_delivery_never_followed(receiver):
    """Following a 3xx would send the event where nobody checked (urllib followed 301-303 with a GET)."""
    url, scripts = receiver
    scripts["/moved"] = script = Script(307, 302)
    target = WebhookTarget(f"{url}/moved", None, WebhookGuard(("127.0.0.0/8",)))
    for status in (307, 302):
        with pytest.raises(DeliveryFailed, match=f"HTTP {status} \\(redirects are not followed\\)"):
            _post(target)
    assert script.requests == 2
