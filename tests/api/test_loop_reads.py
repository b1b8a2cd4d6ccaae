"""loadTable on the event loop (``LoadTableOnLoop``, the dispatcher's loop lane) and what it
remembers to skip work: the document read only when the table moved on.

A client used as a context manager runs every request in one event loop, as a server worker
does, so loadTable is answered on the loop with the asyncio pool; the session client runs each
request in a new loop, where the dispatcher has the handler answer in a thread. Both are the
same app's code (the service, ``parse_load_table`` and ``render_table``): the answers are
compared byte for byte, and a spy shows which lane read what.
"""

from __future__ import annotations

import dataclasses

import pytest

from app.edge.loop_reads import LoadTableOnLoop
from storage.loop_reads import AsyncEntryReader
from tests.api.tables_support import PREFIX, append, assert_same_answer, create_request, table_url
from tests.conftest import authenticated


@pytest.fixture
def full_stack_client(app):
    """The session app's client: its loadTable is answered by the handler, in a thread."""
    return app.test_client()


@pytest.fixture(scope="module")
def fast_client(settings):
    """An app of its own, its client used as a context manager: one event loop for all requests,
    as in a server worker, so the fast path reads with its asyncio pool (the session client runs
    each request in a new loop, where the fast path reads through the service instead)."""
    from app.edge.factory import create_app

    with authenticated(create_app(settings)).test_client() as client:
        yield client


@pytest.fixture
def client(fast_client, clean_catalog):
    return fast_client


@pytest.fixture
def served(monkeypatch) -> list[str]:
    """The tables the loop lane took, and ``"<table> on the loop"`` when read on the event loop."""
    calls: list[str] = []
    original_call = LoadTableOnLoop.__call__
    original_read = AsyncEntryReader.load_entry

    async def spy_call(self, kwargs, headers, in_thread):
        if self.reader.available():  # on the loop the asyncio pool serves (not the session client's)
            calls.append(kwargs["table"])
        return await original_call(self, kwargs, headers, in_thread)

    async def spy_read(self, warehouse_id, namespace, name, unless_at=None):
        row = await original_read(self, warehouse_id, namespace, name, unless_at)
        calls.append(f"{name} on the loop" + (" without its document" if row is not None and not row.metadata else ""))
        return row

    monkeypatch.setattr(LoadTableOnLoop, "__call__", spy_call)
    monkeypatch.setattr(AsyncEntryReader, "load_entry", spy_read)
    return calls


@pytest.fixture
def table(client) -> str:
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db", "nested"]}).status_code == 200
    assert client.post(f"{PREFIX}/namespaces/db/tables", json=create_request("events")).status_code == 200
    assert client.post(f"{PREFIX}/namespaces/db%1Fnested/tables", json=create_request("inner")).status_code == 200
    url = table_url("events")
    append(client, url, 101, 1, None)
    append(client, url, 102, 2, 101)
    return url


def _same(fast, full) -> None:
    assert_same_answer(fast, full)


def _etag(client, url: str) -> str:
    return client.get(url).headers["etag"]


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("", {}),
        ("?snapshots=all", {}),
        ("?snapshots=refs", {}),
        ("", {"X-Iceberg-Access-Delegation": "vended-credentials"}),
        ("", {"X-Iceberg-Access-Delegation": "remote-signing"}),
        ("", {"If-None-Match": '"not-the-etag"'}),
        ("", {"If-None-Match": "*"}),
    ],
)
def test_the_loop_answers_like_the_handler(client, full_stack_client, table, served, path, headers):
    fast = client.get(table + path, headers=headers)
    full = full_stack_client.get(table + path, headers=headers)
    _same(fast, full)
    assert served == ["events", "events on the loop"]


def test_remote_signing_config_is_served_on_both_lanes(client, full_stack_client, table, served):
    """The spec's ``remote-signing-config`` next to the deprecated ``s3.signer.*`` keys, on the
    loop and from the handler."""
    headers = {"X-Iceberg-Access-Delegation": "remote-signing"}
    fast = client.get(table, headers=headers)
    full = full_stack_client.get(table, headers=headers)
    _same(fast, full)
    assert served == ["events", "events on the loop"]
    body = fast.json()
    assert body["remote-signing-config"] == {"properties": {}, "headers": {}}
    assert body["config"]["s3.remote-signing-enabled"] == "true"
    assert body["config"]["s3.signer.endpoint"].endswith("/namespaces/db/tables/events/sign")
    assert "remote-signing-config" not in client.get(table).json()  # no delegation asked for


def test_matching_etag_is_a_304_on_both_lanes(client, full_stack_client, table, served):
    etag = _etag(full_stack_client, table)
    fast = client.get(table, headers={"If-None-Match": etag})
    full = full_stack_client.get(table, headers={"If-None-Match": etag})
    assert fast.status_code == 304 and fast.content == b""
    _same(fast, full)
    assert served == ["events", "events on the loop"]


def test_revalidation_reads_the_document_only_when_the_table_moved_on(client, full_stack_client, table, served):
    etag = _etag(client, table)  # issued on the loop: it knows the metadata location behind it
    served.clear()
    unchanged = client.get(table, headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.headers["etag"] == etag
    assert served == ["events", "events on the loop without its document"]
    assert append(client, table, 103, 3, 102).status_code == 200
    moved_on = client.get(table, headers={"If-None-Match": etag})
    assert moved_on.status_code == 200 and moved_on.headers["etag"] != etag
    assert moved_on.json()["metadata"]["current-snapshot-id"] == 103
    _same(moved_on, full_stack_client.get(table, headers={"If-None-Match": etag}))
    refs_etag = _etag(client, table + "?snapshots=refs")  # same version, another variant
    other_variant = client.get(table, headers={"If-None-Match": refs_etag})
    assert other_variant.status_code == 200
    _same(other_variant, full_stack_client.get(table, headers={"If-None-Match": refs_etag}))


def test_a_table_loaded_again_is_read_without_its_document_until_it_moves_on(client, full_stack_client, table, served):
    first = client.get(table)
    again = client.get(table)
    assert served == ["events", "events on the loop", "events", "events on the loop without its document"]
    _same(again, first)
    _same(again, full_stack_client.get(table + "?snapshots=all"))
    served.clear()
    assert append(client, table, 103, 3, 102, location=first.json()["metadata"]["location"]).status_code == 200
    moved_on = client.get(table)
    assert moved_on.json()["metadata"]["current-snapshot-id"] == 103  # the current version, read in full
    assert client.get(table).content == moved_on.content
    assert served == ["events", "events on the loop", "events", "events on the loop without its document"]
    _same(moved_on, full_stack_client.get(table))


def test_a_name_registered_again_at_the_same_version_is_read_in_full(client, full_stack_client, table, served):
    """A metadata location names one file, but a dropped table's name may be taken again by an
    entry at that same file (registerTable): the held text is not that entry's to answer with."""
    before = client.get(table)
    gone = client.post(f"{table}/unregister")
    assert gone.status_code == 200
    register = {"name": "events", "metadata-location": gone.json()["metadata-location"]}
    assert client.post(f"{PREFIX}/namespaces/db/register", json=register).status_code == 200
    served.clear()
    again = client.get(table)
    assert again.status_code == 200 and again.content == before.content
    assert served == ["events", "events on the loop without its document"]  # then the handler reads it all
    _same(again, full_stack_client.get(table))


def test_refs_etag_differs_from_all(client, table):
    assert _etag(client, table) != _etag(client, table + "?snapshots=refs")


@pytest.mark.parametrize(
    "path",
    [
        f"{PREFIX}/namespaces/db/tables/missing",
        f"{PREFIX}/namespaces/nope/tables/events",
        "/v1/no-such-warehouse/namespaces/db/tables/events",
        f"{PREFIX}/namespaces/db%1Fnested/tables/inner",
        f"{PREFIX}/namespaces/db%1Fnested/tables/events",
    ],
)
def test_errors_and_nested_namespaces_match(client, full_stack_client, table, served, path):
    """A missing table is its 404 from the one row read on the loop; a warehouse not cached has
    the handler answer (its 404) without entering the loop lane: only a warehouse the cache knows
    to be native is read on the loop (a federated one's remote answers: app/federation/)."""
    _same(client.get(path), full_stack_client.get(path))
    if "no-such-warehouse" in path:
        assert served == []
    else:
        assert served[0] == path.rsplit("/", 1)[1]


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("?snapshots=bogus", {}, 400),  # connexion validates the enum
        ("?snapshots=all&extra=1", {}, 400),  # strict validation refuses unknown parameters
        ("", {"X-Iceberg-Access-Delegation": "carrier-pigeon"}, 400),
    ],
)
def test_what_the_yaml_refuses_never_reaches_the_loop(client, full_stack_client, table, served, path, headers, status):
    fast = client.get(table + path, headers=headers)
    assert fast.status_code == status
    assert fast.json()["error"]["type"] == "BadRequestException"
    _same(fast, full_stack_client.get(table + path, headers=headers))
    assert served == []


def test_escaped_names_are_read_by_connexion_and_unprefixed_routes_are_the_default_warehouse_s(
    client, full_stack_client, table, served
):
    escaped = f"{PREFIX}/namespaces/db/tables/ev%65nts"
    _same(client.get(escaped), full_stack_client.get(escaped))
    assert client.get(escaped).status_code == 200
    assert served[::2] == ["events", "events"]  # read by connexion's parsing, then the same loop lane
    served.clear()
    unprefixed = "/v1/namespaces/db/tables/events"  # the default warehouse's (RequestGuardMiddleware)
    fast = client.get(unprefixed)
    assert fast.status_code == 200
    _same(fast, full_stack_client.get(unprefixed))
    assert served == ["events", "events on the loop without its document"]  # held since the reads above


def test_the_session_client_loads_through_the_handler(app, clean_catalog, served):
    """A request in an event loop the asyncio pool does not belong to still gets its table (from
    the handler, in a thread)."""
    session_client = app.test_client()
    assert session_client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert session_client.post(f"{PREFIX}/namespaces/db/tables", json=create_request("events")).status_code == 200
    for _ in range(2):  # the first request may bind the pool to its loop; the second runs in another
        assert session_client.get(table_url("events")).status_code == 200
    assert served.count("events on the loop") <= 1


def test_the_request_is_logged_and_counted_as_load_table(client, table, capfd):
    capfd.readouterr()
    client.get(table, headers={"X-Request-Id": "loop-lane-log-check"})
    lines = [line for line in capfd.readouterr().err.splitlines() if "loop-lane-log-check" in line]
    assert len(lines) == 1
    assert '"operation":"loadTable"' in lines[0]
    assert '"table":"events"' in lines[0] and '"namespace":"db"' in lines[0] and '"status":200' in lines[0]
    metrics = client.get("/metrics").text
    assert 'operation="loadTable"' in metrics


@pytest.fixture(scope="module")
def server_planning_apps(settings):
    """An app configured with ``GROWLER_SCAN_PLANNING_MODE=server``: its loop and its handler."""
    from app.edge.factory import create_app
    from tests.conftest import authenticated

    configured = authenticated(create_app(dataclasses.replace(settings, scan_planning_mode="server")))
    full = configured.test_client()
    with configured.test_client() as fast:
        yield fast, full


@pytest.mark.parametrize(
    ("path", "headers"),
    [("", {}), ("?snapshots=refs", {}), ("", {"X-Iceberg-Access-Delegation": "vended-credentials"})],
)
def test_scan_planning_mode_is_in_the_table_config_on_both_lanes(
    client, server_planning_apps, table, served, path, headers
):
    fast, full = server_planning_apps
    answer = fast.get(table + path, headers=headers)
    _same(answer, full.get(table + path, headers=headers))
    assert served == ["events", "events on the loop"]
    assert answer.json()["config"]["scan-planning-mode"] == "server"
    # the mode is part of what the ETag names: a client's cached config is not revalidated across a change
    plain = client.get(table + path, headers=headers)
    assert "scan-planning-mode" not in plain.json()["config"]
    assert plain.headers["etag"] != answer.headers["etag"]
    assert fast.get(table + path, headers={**headers, "If-None-Match": plain.headers["etag"]}).status_code == 200
    revalidated = fast.get(table + path, headers={**headers, "If-None-Match": answer.headers["etag"]})
    assert revalidated.status_code == 304
    _same(revalidated, full.get(table + path, headers={**headers, "If-None-Match": answer.headers["etag"]}))
