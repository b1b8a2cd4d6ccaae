"""The audit trail (issue 51, docs/audit.md): a committed record for every authenticated request
and every refusal, queryable by administrators only, retained for a configured time, and never a
secret in it.

Each request here carries an ``X-Request-Id`` of its own, and its record is found by it. The
trail is off by default (``GROWLER_AUDIT_TRAIL``, docs/audit.md): this module's apps turn it on, and
the last test shows the default app records nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from app.audit.writer import AuditUnavailable, AuditWriter
from app.composition.services import services_of
from app.ground import metrics
from storage.audit import AuditRecord, AuditRows
from storage.db import AsyncDatabase, Database
from tests.api.authz_support import MANAGEMENT as M
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url
from tests.api.webhook_support import Script
from tests.conftest import TEST_BUCKET, fetch_token

AUDIT = f"{M}/audit"
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}


@pytest.fixture(scope="module")
def app(settings):
    """The suite's app with the audit trail on (its principals and clients use it too)."""
    from app.edge.factory import create_app
    from tests.conftest import authenticated

    return authenticated(create_app(dataclasses.replace(settings, audit_trail=True)))


def _rid() -> str:
    return uuid.uuid4().hex


def _records(db: psycopg.Connection, request_id: str) -> list[dict[str, Any]]:
    with db.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        return cursor.execute("SELECT * FROM audit_record WHERE request_id = %s", (request_id,)).fetchall()


def _one(db: psycopg.Connection, request_id: str) -> dict[str, Any]:
    found = _records(db, request_id)
    assert len(found) == 1, found
    return found[0]


def _all_text(db: psycopg.Connection) -> str:
    return "\n".join(row[0] for row in db.execute("SELECT a::text FROM audit_record a"))


@pytest.fixture
def table(client, ns) -> str:
    assert client.post(tables_url(), json=create_request("t")).status_code == 200
    return "t"


def test_an_allowed_load_is_recorded_with_its_rule(principals, table, db):
    caller = principals.new("reader")
    principals.grant(caller, "read", "table", "test", ("db",), "t")
    rid = _rid()
    loaded = caller.client.get(table_url("t"), headers={"X-Request-Id": rid, "User-Agent": "audit-test/1.0"})
    assert loaded.status_code == 200, loaded.text
    record = _one(db, rid)  # committed before the response started
    assert record["principal"] == caller.name and record["identity_provider"] == "growler"
    assert record["operation"] == "loadTable" and record["method"] == "GET"
    assert record["object"] == "test:db.t"
    assert record["decision"] == "allowed" and record["status"] == 200
    assert record["rule"] == "read on table test:db.t"
    assert record["user_agent"] == "audit-test/1.0" and record["client"]
    assert record["access"] is None  # nothing vended without the header


def test_a_refused_load_is_recorded_with_what_was_missing(principals, table, db):
    caller = principals.new("nobody")
    # no grant: the table is hidden from it (404, as authorization refuses what a caller cannot see)
    rid = _rid()
    refused = caller.client.get(table_url("t"), headers={"X-Request-Id": rid})
    assert refused.status_code in (403, 404), refused.text
    record = _one(db, rid)
    assert record["decision"] == "refused" and record["status"] == refused.status_code
    assert record["principal"] == caller.name and record["operation"] == "loadTable"
    assert record["rule"].startswith("lacks ")


def test_a_refused_management_call_is_recorded_and_only_administrators_read_the_trail(principals, db):
    caller = principals.new("curious")
    rid = _rid()
    refused = caller.client.get(AUDIT, headers={"X-Request-Id": rid})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "ForbiddenException"
    record = _one(db, rid)
    assert record["operation"] == "listAuditRecords" and record["decision"] == "refused"
    assert record["rule"] == "Only administrators may read the audit trail"
    assert record["principal"] == caller.name


def test_an_unauthenticated_request_is_recorded_without_its_token(app, db):
    rid = _rid()
    bogus = "not-a-token-" + uuid.uuid4().hex
    anonymous = app.anonymous_client()
    answered = anonymous.get("/v1/config", headers={"X-Request-Id": rid, "Authorization": f"Bearer {bogus}"})
    assert answered.status_code == 401
    record = _one(db, rid)
    assert record["decision"] == "unauthenticated" and record["status"] == 401
    assert record["principal"] is None and record["rule"].startswith("authentication failed: ")
    missing = _rid()
    assert anonymous.get("/v1/config", headers={"X-Request-Id": missing}).status_code == 401
    assert _one(db, missing)["rule"] == "authentication failed: missing"
    assert bogus not in _all_text(db)


def test_vended_credentials_are_recorded_without_any_secret(app, client, table, settings, db):
    rid = _rid()
    token = fetch_token(app.anonymous_client())
    loaded = app.anonymous_client().get(
        table_url("t"), headers={**VENDED, "X-Request-Id": rid, "Authorization": f"Bearer {token}"}
    )
    assert loaded.status_code == 200, loaded.text
    (credential,) = loaded.json()["storage-credentials"]  # the suite's warehouse vends STS sessions
    config = credential["config"]
    secrets = [config[key] for key in ("s3.access-key-id", "s3.secret-access-key", "s3.session-token") if key in config]
    assert len(secrets) >= 2
    record = _one(db, rid)
    (access,) = record["access"]
    assert access["kind"] == "vended" and access["mode"] == "sts"
    assert access["prefixes"][0] == credential["prefix"] == loaded.json()["metadata"]["location"]
    assert "GET" in access["methods"] and "PUT" in access["methods"]
    assert access["expires-at-ms"] == int(config["s3.session-token-expires-at-ms"])
    text = _all_text(db)  # no record holds a key, a session token or a bearer token
    for secret in (*secrets, settings.s3.secret_key, token):
        assert secret not in text


@pytest.fixture(scope="module")
def signing_app(settings):
    from app.edge.factory import create_app
    from tests.conftest import authenticated

    signing = dataclasses.replace(
        settings,
        audit_trail=True,
        warehouse="signed",
        warehouse_location=f"s3://{TEST_BUCKET}/signed/",
        storage_credentials_mode="remote-signing",
    )
    return authenticated(create_app(signing)), signing


def test_a_signed_request_is_recorded_without_the_signature(signing_app, clean_catalog, db):
    app, signing = signing_app
    client = app.test_client()
    assert client.post("/v1/signed/namespaces", json={"namespace": ["ns"]}).status_code == 200
    request = {**create_request("tbl"), "location": f"s3://{TEST_BUCKET}/signed/ns/tbl"}
    assert client.post("/v1/signed/namespaces/ns/tables", json=request).status_code == 200
    uri = f"{signing.s3.endpoint}/{TEST_BUCKET}/signed/ns/tbl/data/x.parquet"
    rid = _rid()
    sign = {"method": "GET", "uri": uri, "region": "us-east-1", "headers": {}}
    signed = client.post("/v1/signed/namespaces/ns/tables/tbl/sign", json=sign, headers={"X-Request-Id": rid})
    assert signed.status_code == 200, signed.text
    authorization = signed.json()["headers"]["Authorization"][0]
    record = _one(db, rid)
    assert record["operation"] == "signRequest" and record["decision"] == "allowed"
    (access,) = record["access"]
    assert access["kind"] == "signed" and access["method"] == "GET" and access["lifetime-s"] == 900
    assert access["path"].endswith(f"/{TEST_BUCKET}/signed/ns/tbl/data/x.parquet")
    text = _all_text(db)
    assert authorization not in text and authorization.rpartition("Signature=")[2] not in text
    assert signing.s3.secret_key not in text


def test_the_trail_is_queried_by_principal_object_decision_and_time_and_paged(principals, client, table, db):
    caller = principals.new("pager")
    principals.grant(caller, "read", "table", "test", ("db",), "t")
    started = datetime.now(UTC) - timedelta(seconds=1)
    for _ in range(3):
        assert caller.client.get(table_url("t")).status_code == 200
    assert caller.client.get(AUDIT).status_code == 403
    mine = client.get(AUDIT, params={"principal": caller.name}).json()["records"]
    assert [r["operation"] for r in mine] == ["listAuditRecords", "loadTable", "loadTable", "loadTable"]
    assert all(r["principal"] == caller.name for r in mine)
    assert mine == sorted(mine, key=lambda r: (r["recorded-at"], r["id"]), reverse=True)  # newest first
    refused = client.get(AUDIT, params={"principal": caller.name, "decision": "refused"}).json()["records"]
    assert [r["operation"] for r in refused] == ["listAuditRecords"]
    on_table = client.get(AUDIT, params={"principal": caller.name, "object": "test:db.t"}).json()["records"]
    assert len(on_table) == 3 and all(r["object"] == "test:db.t" for r in on_table)
    assert client.get(AUDIT, params={"principal": caller.name, "object": "test:db.x"}).json()["records"] == []
    since = client.get(AUDIT, params={"principal": caller.name, "since": started.isoformat()}).json()["records"]
    assert len(since) == 4
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert client.get(AUDIT, params={"principal": caller.name, "since": future}).json()["records"] == []
    # paging: one record a page, each once, in order, the token bound to the query
    seen, token = [], ""
    while True:
        params = {"principal": caller.name, "pageSize": 1, **({"pageToken": token} if token else {})}
        page = client.get(AUDIT, params=params).json()
        seen += page["records"]
        token = page.get("next-page-token")
        if not token:
            break
        other = client.get(AUDIT, params={"principal": "someone-else", "pageToken": token})
        assert other.status_code == 400  # a token of another query
    assert [r["id"] for r in seen] == [r["id"] for r in mine]


@pytest.mark.parametrize(
    "params",
    [
        {"since": "yesterday"},
        {"since": "2026-12-07T06:00:00Z", "until": "2026-12-07T05:00:00Z"},
        {"decision": "maybe"},
        {"pageSize": 0},
        {"pageSize": 1001},
        {"pageToken": "not-a-token"},
        {"principal": "x" * 1001},
    ],
)
def test_bad_queries_are_400(client, params):
    answered = client.get(AUDIT, params=params)
    assert answered.status_code == 400, answered.text
    assert answered.json()["error"]["type"] == "BadRequestException"


def test_retention_deletes_old_records_only(app, settings, db):
    rows = AuditRows(services_of(app.app).audit.rows.db)
    old, new = _rid(), _rid()
    now = datetime.now(UTC)
    days = services_of(app.app).audit.retention_days
    rows.insert([_record(old, now - timedelta(days=days, hours=1)), _record(new, now - timedelta(days=days - 1))])
    assert services_of(app.app).audit.expire() >= 1
    assert _records(db, old) == [] and len(_records(db, new)) == 1


def test_no_response_without_its_record_the_database_refusing_gives_503(client, ns, db, monkeypatch):
    def refuse(self, records):
        raise psycopg.OperationalError("the database is down")

    monkeypatch.setattr(AuditRows, "insert", refuse)
    rid = _rid()
    answered = client.get(f"{PREFIX}/namespaces", headers={"X-Request-Id": rid})
    assert answered.status_code == 503, answered.text
    assert answered.headers["Retry-After"] == "1"
    assert answered.json()["error"]["type"] == "ServiceUnavailableException"
    assert "namespaces" not in answered.json()
    monkeypatch.undo()
    assert client.get(f"{PREFIX}/namespaces").status_code == 200


def test_the_group_commit_writes_batches_and_fails_closed_on_a_closed_pool(settings):
    """The event loop's writer against PostgreSQL: concurrent records share commits; with its pool
    closed every waiting request hears AuditUnavailable (answered 503), none is left waiting."""
    database = Database(settings.database_url, max_size=1)
    database.open()
    ids = [_rid() for _ in range(20)]

    async def scenario() -> None:
        pool = AsyncDatabase(settings.database_url, max_size=2, timeout_s=2, statement_timeout_ms=2000)
        await pool.start(fill=True)
        writer = AuditWriter(AuditRows(database), pool)
        before = _batches()
        await asyncio.gather(*(_begun(writer, rid) for rid in ids))
        count, total = (a - b for a, b in zip(_batches(), before, strict=True))
        assert total == len(ids) and count < len(ids)  # grouped
        await pool.close()
        results = await asyncio.gather(*(_begun(writer, _rid()) for _ in range(3)), return_exceptions=True)
        assert all(isinstance(result, AuditUnavailable) for result in results), results

    try:
        asyncio.run(scenario())
        with psycopg.connect(settings.database_url) as conn:
            found = conn.execute("SELECT count(*) FROM audit_record WHERE request_id = ANY(%s)", (ids,)).fetchone()
        assert found[0] == len(ids)
    finally:
        database.close()


def test_a_batch_waits_for_the_requests_in_flight_and_no_longer(settings):
    """The gathering (docs/audit.md "Durability"): a batch is held until every request begun on the
    loop has queued its record (one commit for all of them, however they straggle), released as
    soon as the last one gives up on its record (``abandon``) instead of waiting out the window,
    and written after the window when a request in flight never comes."""
    database = Database(settings.database_url, max_size=1)
    database.open()

    async def scenario() -> None:
        pool = AsyncDatabase(settings.database_url, max_size=2, timeout_s=5, statement_timeout_ms=5000)
        await pool.start(fill=True)
        try:
            patient = AuditWriter(AuditRows(database), pool, gather_s=60)  # a window no test outlasts
            before = _batches()
            for _ in range(5):
                patient.begin()
            first = [asyncio.ensure_future(patient.write(_record(_rid(), datetime.now(UTC)))) for _ in range(3)]
            await _until_holding(patient)  # the batch task holds: two requests are in flight
            assert not any(write.done() for write in first)
            rest = [asyncio.ensure_future(patient.write(_record(_rid(), datetime.now(UTC)))) for _ in range(2)]
            async with asyncio.timeout(10):
                await asyncio.gather(*first, *rest)
            assert tuple(a - b for a, b in zip(_batches(), before, strict=True)) == (1, 5)  # one commit

            patient.begin()
            patient.begin()
            waiting = asyncio.ensure_future(patient.write(_record(_rid(), datetime.now(UTC))))
            await _until_holding(patient)
            assert not waiting.done()
            patient.abandon()  # the other request ended without a response: nobody left to wait for
            async with asyncio.timeout(10):
                await waiting

            brief = AuditWriter(AuditRows(database), pool, gather_s=0.01)
            brief.begin()
            brief.begin()  # never queues within the window
            async with asyncio.timeout(10):
                await brief.write(_record(_rid(), datetime.now(UTC)))
            brief.abandon()
        finally:
            await pool.close()

    try:
        asyncio.run(scenario())
    finally:
        database.close()


async def _until_holding(writer: AuditWriter) -> None:
    """Yield the loop until the writer's batch task holds its batch (a condition on the loop's own
    state, bounded as a hang guard)."""
    async with asyncio.timeout(10):
        while not writer.holding():
            await asyncio.sleep(0)


async def _begun(writer: AuditWriter, request_id: str) -> None:
    """A request's record as the middleware writes it: begun, then queued."""
    writer.begin()
    await writer.write(_record(request_id, datetime.now(UTC)))


def _batches() -> tuple[float, float]:
    """(batches, records) the group commit wrote so far in this process."""
    samples = {s.name: s.value for metric in metrics.AUDIT_BATCHES.collect() for s in metric.samples}
    return samples["growler_audit_batch_records_count"], samples["growler_audit_batch_records_sum"]


def _record(request_id: str, at: datetime) -> AuditRecord:
    return AuditRecord(
        recorded_at=at,
        request_id=request_id,
        principal="p",
        identity_provider="growler",
        roles=("r1", "r2"),
        operation="loadTable",
        method="GET",
        path="/v1/test/namespaces/db/tables/t",
        object="test:db.t",
        decision="allowed",
        rule="read on table test:db.t",
        status=200,
        client="127.0.0.1",
        user_agent="ua",
        access=({"kind": "vended", "mode": "static", "prefixes": ["s3://b/t"], "methods": ["GET"]},),
    )


def test_a_path_postgresql_cannot_store_as_is_is_recorded_all_the_same(client, db):
    """A NUL in the path (``%00``) is a 400 for the caller - and a record, its NUL replaced: a
    record the database refused would fail its whole batch (every request of it answered 503)."""
    rid = _rid()
    answered = client.get(f"{PREFIX}/namespaces/a%00b", headers={"X-Request-Id": rid})
    assert answered.status_code == 400, answered.text
    record = _one(db, rid)
    assert record["path"].endswith("a\ufffdb") and record["status"] == 400


def test_the_trail_is_off_by_default_and_its_setting_is_checked(settings, db):
    from app.edge.factory import create_app
    from app.ground.settings import parse_audit_trail
    from tests.conftest import authenticated

    assert settings.audit_trail is False  # the suite's settings are the product's defaults
    default = authenticated(create_app(settings)).test_client()
    rid = _rid()
    assert default.get("/v1/config", headers={"X-Request-Id": rid}).status_code == 200
    assert _records(db, rid) == []
    assert parse_audit_trail("on") is True and parse_audit_trail(" OFF ") is False
    with pytest.raises(ValueError, match="GROWLER_AUDIT_TRAIL must be on or off"):
        parse_audit_trail("yes")


def test_the_console_shows_the_trail_to_administrators_and_a_restricted_refusal_in_it(app, principals, table, db):
    from tests.api.test_console import sign_in
    from tests.api.test_read_restrictions import restrict

    caller = principals.new("restricted")
    principals.grant(caller, "read", "table", "test", ("db",), "t")
    admin = app.test_client()
    body = {"columns": [{"name": "data", "action": "hide"}]}
    securable = {"type": "table", "namespace": ["db"], "name": "t"}
    assert restrict(admin, ("role", caller.role), securable, **body).status_code == 200
    principals.settle()
    rid = _rid()
    refused = caller.client.get(table_url("t"), headers={"X-Request-Id": rid})
    assert refused.status_code == 403  # restricted and not a trusted engine
    record = _one(db, rid)
    assert record["decision"] == "refused" and record["status"] == 403
    assert "not a trusted engine" in record["rule"]

    browser = app.anonymous_client()
    assert sign_in(browser).status_code == 303
    page = browser.get("/ui/audit", params={"principal": caller.name, "decision": "refused"})
    assert page.status_code == 200
    assert 'id="audit-off"' not in page.text  # this app records
    rows = page.text[page.text.index('id="audit-records"') :]
    assert "loadTable" in rows and "not a trusted engine" in rows and caller.name in rows
    assert rows.count("<tr>") - 1 == len([r for r in _records_of(db, caller.name) if r["decision"] == "refused"])
    assert browser.get("/ui/audit", params={"decision": "bogus"}).status_code == 400
    # anyone else: the API's 403
    secret = principals.admin.post(f"{M}/principals/{caller.name}/rotate").json()["client-secret"]
    other = app.anonymous_client()
    assert sign_in(other, caller.name, secret).status_code == 303
    assert other.get("/ui/audit").status_code == 403


def _records_of(db: psycopg.Connection, principal: str) -> list[dict[str, Any]]:
    with db.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        return cursor.execute("SELECT * FROM audit_record WHERE principal = %s", (principal,)).fetchall()


def test_a_sink_of_the_audit_trail_gets_every_record_in_order_and_no_secret(client, principals, table, receiver):
    """Export through the change feed's sinks (docs/audit.md "Export"): a webhook asking for the
    audit trail only gets each record written after it was made, as a CloudEvent, in the order of
    their transactions - the allowed, the refused, the unauthenticated - and no change event."""
    url, scripts = receiver
    scripts["/audit"] = script = Script()
    body = {
        "name": "audit-hook",
        "kind": "webhook",
        "url": f"{url}/audit",
        "filters": {"audit": True, "changes": False},
    }
    created = client.post("/management/v1/event-sinks", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["filters"]["audit"] is True
    try:
        reader = principals.new("exported")
        principals.grant(reader, "read", "table", "test", ("db",), "t")
        rids = [_rid() for _ in range(4)]
        assert reader.client.get(table_url("t"), headers={"X-Request-Id": rids[0]}).status_code == 200
        assert reader.client.get(AUDIT, headers={"X-Request-Id": rids[1]}).status_code == 403
        anonymous = client.get(table_url("t"), headers={"X-Request-Id": rids[2], "Authorization": "Bearer nope"})
        assert anonymous.status_code == 401
        assert client.post(tables_url(), json=create_request("u"), headers={"X-Request-Id": rids[3]}).status_code == 200

        def delivered() -> list[dict[str, Any]]:
            return [event for event, _, _ in script.received if event["data"].get("request-id") in rids]

        script.wait_until(lambda: len(delivered()) == len(rids))
        events = delivered()
        assert [event["data"]["request-id"] for event in events] == rids  # in order, each once
        assert [event["type"] for event in events] == [
            "org.growler.audit.allowed",
            "org.growler.audit.refused",
            f"org.growler.audit.{events[2]['data']['decision']}",
            "org.growler.audit.allowed",
        ]
        assert events[2]["data"]["status"] == 401
        assert {event["source"] for event in events} == {"/growler/audit"}
        assert events[0]["subject"] == "test:db.t" and events[0]["id"] == f"audit-{events[0]['data']['id']}"
        assert events[0]["data"]["principal"] == reader.name and events[0]["data"]["operation"] == "loadTable"
        ids = [event["data"]["id"] for event, _, _ in script.received]
        assert ids == sorted(ids) and len(ids) == len(set(ids))
        assert all(event["type"].startswith("org.growler.audit.") for event, _, _ in script.received)
        raw = b"".join(body for _, body, _ in script.received)
        assert b"nope" not in raw and b"Bearer" not in raw
    finally:
        assert client.delete("/management/v1/event-sinks/audit-hook").status_code == 204
