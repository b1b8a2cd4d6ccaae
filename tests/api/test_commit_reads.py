"""What a commit reads: the table's document comes from the database only when this worker does
not already have that version (its own previous commit is the usual case), and a commit always
starts from the newest version, whichever worker wrote it."""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from app.tables.memory import ParsedMetadataCache
from tests.api.tables_support import PREFIX, append, create_request, table_url, tables_url


@pytest.fixture
def reads(app, client, monkeypatch) -> list[tuple[str | None, bool]]:
    """Each row read by the table service: (the version it said it had, whether the document came)."""
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    repository = services_of(app.app).tables.repository
    original = repository.load_entry
    seen: list[tuple[str | None, bool]] = []

    def spy(*args, **kwargs):
        row = original(*args, **kwargs)
        seen.append((kwargs.get("unless_at"), bool(row and row.metadata)))
        return row

    monkeypatch.setattr(repository, "load_entry", spy)
    return seen


def created(client) -> str:
    """Create ``db.t``; its location (where its snapshots' manifest lists go)."""
    response = client.post(tables_url(), json=create_request("t"))
    assert response.status_code == 200
    return response.json()["metadata"]["location"]


def test_a_commit_after_this_workers_own_reads_no_document(client, reads):
    location = created(client)
    first = append(client, table_url("t"), 1, 1, None, location)
    assert first.status_code == 200
    reads.clear()
    second = append(client, table_url("t"), 2, 2, 1, location)
    assert second.status_code == 200, second.text
    assert reads == [(first.json()["metadata-location"], False)]
    loaded = client.get(table_url("t")).json()
    assert loaded["metadata"] == second.json()["metadata"]
    assert [s["snapshot-id"] for s in loaded["metadata"]["snapshots"]] == [1, 2]


def test_a_commit_starts_from_another_workers_newer_version(app, client, reads, monkeypatch):
    tables = services_of(app.app).tables
    location = created(client)
    mine = append(client, table_url("t"), 1, 1, None, location)
    assert mine.status_code == 200
    this_worker = tables.parsed
    monkeypatch.setattr(tables.committer, "parsed", ParsedMetadataCache())  # another worker: knows nothing
    theirs = append(client, table_url("t"), 2, 2, 1, location)
    assert theirs.status_code == 200
    monkeypatch.setattr(tables.committer, "parsed", this_worker)  # back: this worker still holds version 1
    reads.clear()
    stale = append(client, table_url("t"), 3, 2, 1, location)  # a client that missed the other commit
    assert stale.status_code == 409
    assert reads == [(mine.json()["metadata-location"], True)]  # moved on: the document was read
    third = append(client, table_url("t"), 3, 3, 2, location)
    assert third.status_code == 200, third.text
    snapshots = third.json()["metadata"]["snapshots"]
    assert [(s["snapshot-id"], s.get("parent-snapshot-id")) for s in snapshots] == [(1, None), (2, 1), (3, 2)]
    assert [entry["metadata-file"] for entry in third.json()["metadata"]["metadata-log"]][-2:] == [
        mine.json()["metadata-location"],
        theirs.json()["metadata-location"],
    ]


def test_a_commit_another_writer_made_hopeless_is_refused_before_the_document_is_parsed(
    app, client, reads, monkeypatch
):
    from app.rules.table import serialisation

    tables = services_of(app.app).tables
    location = created(client)
    mine = append(client, table_url("t"), 1, 1, None, location)
    this_worker = tables.parsed
    monkeypatch.setattr(tables.committer, "parsed", ParsedMetadataCache())  # another worker commits
    assert append(client, table_url("t"), 2, 2, 1, location).status_code == 200
    monkeypatch.setattr(tables.committer, "parsed", this_worker)
    parsed: list[object] = []
    original = serialisation.metadata_from_dict
    monkeypatch.setattr(serialisation, "metadata_from_dict", lambda *a: parsed.append(a) or original(*a))
    reads.clear()

    stale = append(client, table_url("t"), 3, 2, 1, location)

    assert stale.status_code == 409
    error = stale.json()["error"]
    assert (error["type"], error["message"]) == (
        "CommitFailedException",
        "Requirement failed: branch main has changed: expected id 1 != 2",
    )
    assert reads == [(mine.json()["metadata-location"], True)]  # the newer document was read...
    assert parsed == []  # ...and refused on its decoded fields, without the model
    assert append(client, table_url("t"), 3, 3, 2, location).status_code == 200  # a client that is up to date
    assert len(parsed) == 1  # the base is parsed once, for the commit that can win


def test_writers_refused_against_one_version_decode_its_document_once(app, client, reads, monkeypatch):
    """N writers on a table: after each commit, up to N-1 of them try against the version before.
    The first hopeless commit decodes the new version's document; the next ones are refused on the
    fields this worker read from it then - the same error, and the winner's commit still lands."""
    import json

    tables = services_of(app.app).tables
    location = created(client)
    assert append(client, table_url("t"), 1, 1, None, location).status_code == 200
    this_worker = tables.parsed
    monkeypatch.setattr(tables.committer, "parsed", ParsedMetadataCache())  # another worker commits
    theirs = append(client, table_url("t"), 2, 2, 1, location)
    assert theirs.status_code == 200
    monkeypatch.setattr(tables.committer, "parsed", this_worker)
    decoded: list[int] = []
    loads = json.loads

    def counting_loads(text, *args, **kwargs):
        if isinstance(text, str) and '"metadata-log"' in text and '"last-sequence-number"' in text:
            decoded.append(len(text))  # a stored metadata document (not a request body)
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)

    stale = [append(client, table_url("t"), 10 + n, 2, 1, location) for n in range(3)]

    assert [(r.status_code, r.json()["error"]["message"]) for r in stale] == [
        (409, "Requirement failed: branch main has changed: expected id 1 != 2")
    ] * 3
    assert len(decoded) == 1  # the newer version, once
    winner = append(client, table_url("t"), 3, 3, 2, location)  # up to date: the document is parsed now
    assert winner.status_code == 200, winner.text
    assert len(decoded) == 2
    assert [s["snapshot-id"] for s in winner.json()["metadata"]["snapshots"]] == [1, 2, 3]
    assert winner.json()["metadata"]["metadata-log"][-1]["metadata-file"] == theirs.json()["metadata-location"]
