"""reportMetrics is bounded for a caller who may only read: size, rate per principal, age."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from app.composition.services import services_of
from app.ground.rates import TokenBuckets
from app.tables.metrics_reports import MAX_REPORT_BYTES, RETENTION_S
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url

pytestmark = pytest.mark.usefixtures("clean_catalog")

REPORT = {
    "report-type": "commit-report",
    "table-name": "db.t",
    "snapshot-id": 1,
    "sequence-number": 1,
    "operation": "append",
    "metrics": {},
}


@pytest.fixture
def table(client, db) -> Iterator[str]:
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post(tables_url(), json=create_request("t")).status_code == 200
    yield table_url("t") + "/metrics"
    db.execute("TRUNCATE metrics_report")  # the reports this module sent: other tests count them


def reports(db) -> int:
    return db.execute("SELECT count(*) FROM metrics_report").fetchone()[0]


def test_a_report_over_the_size_bound_is_refused(client, db, table):
    db.execute("TRUNCATE metrics_report")
    big = {**REPORT, "metadata": {"padding": "x" * MAX_REPORT_BYTES}}
    refused = client.post(table, json=big)
    assert refused.status_code == 413, refused.text
    assert refused.json()["error"]["type"] == "BadRequestException"
    assert reports(db) == 0
    assert client.post(table, json=REPORT).status_code == 204
    assert reports(db) == 1


def test_a_principal_sending_too_fast_is_told_to_slow_down(client, app, db, table, monkeypatch):
    """A frozen clock: the burst is all a principal gets until time passes."""

    now = [1000.0]
    monkeypatch.setattr(services_of(app.app).tables.reports, "buckets", TokenBuckets(1.0, 2.0, clock=lambda: now[0]))
    db.execute("TRUNCATE metrics_report")
    assert [client.post(table, json=REPORT).status_code for _ in range(2)] == [204, 204]
    refused = client.post(table, json=REPORT)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["type"] == "SlowDownException"
    assert refused.headers["Retry-After"] == "1"
    assert reports(db) == 2
    now[0] += 1.0  # a token a second
    assert client.post(table, json=REPORT).status_code == 204
    assert reports(db) == 3


def test_token_buckets_refill_at_their_rate_up_to_their_burst():
    now = [0.0]
    buckets = TokenBuckets(2.0, 3.0, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    assert buckets.take("b") == 0.0  # a bucket per key
    now[0] += 10.0
    assert [buckets.take("a") for _ in range(4)][:3] == [0.0, 0.0, 0.0]  # back to the burst, no more


def test_old_reports_are_expired_by_housekeeping(client, app, db, table):
    from app.housekeeping import Housekeeper
    from storage.idempotency import IdempotencyRepository

    db.execute("TRUNCATE metrics_report")
    for _ in range(2):
        assert client.post(table, json=REPORT).status_code == 204
    db.execute(
        "UPDATE metrics_report SET received_at = now() - make_interval(secs => %s)"
        " WHERE id = (SELECT min(id) FROM metrics_report)",
        (RETENTION_S + 60,),
    )
    tables = services_of(app.app).tables
    keeper = Housekeeper(
        tables.repository, tables.objects, IdempotencyRepository(tables.repository.db), threading.Event()
    )
    keeper.run_round(3600)  # (or the app's own housekeeping thread, if it came first)
    assert reports(db) == 1  # the old one gone, the recent one kept
