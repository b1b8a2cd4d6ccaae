"""A Spark job that runs longer than its temporary credentials keeps writing (``sts`` mode).

Growler vends table-scoped STS credentials with ``s3.session-token-expires-at-ms`` and
``client.refresh-credentials-endpoint``; Iceberg's ``VendedCredentialsProvider`` calls that
endpoint (loadCredentials) five minutes before the expiry and goes on with what it gets. A job
that outlives its first credentials (900 s, the STS's shortest) must therefore write past their
expiry without a failure. Nothing short of such a job shows that refresh works end to end: the
provider, Growler's loadCredentials and its vending, the STS's session policy.

The job (``sts_long_job_support``) starts when collection ends and runs beside the rest of the
suite; this test is ordered last (tests/integration/conftest.py) and waits for it to end. Run alone
it waits the whole ~17 minutes.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pyiceberg.catalog.rest import RestCatalog

from app.ground.locations import Location
from tests.conftest import TEST_BUCKET, TEST_CREDENTIAL
from tests.integration.sts_long_job_support import MARGIN_S, TABLE, WAREHOUSE, LongJobStack

pytestmark = pytest.mark.slow

# From the test's start: the job takes ~17 minutes when it starts with this test (run alone), and
# ends about when this test starts when it overlapped the suite.
JOB_TIMEOUT_S = 1800


def request_lines(stack: LongJobStack, operation: str) -> list[dict]:
    lines = (line for line in stack.server.log().splitlines() if line.startswith("{"))
    return [doc for doc in map(json.loads, lines) if doc.get("event") == "request" and doc["operation"] == operation]


def epoch_ms(ts: str) -> int:
    """A log line's ``ts`` (``2026-11-25T05:33:07.123Z``) in epoch milliseconds."""
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


def test_a_spark_job_outliving_its_credentials_refreshes_them_and_loses_no_write(long_sts_job: LongJobStack):
    process = long_sts_job.process
    process.wait(timeout=JOB_TIMEOUT_S)
    report = long_sts_job.report()
    assert process.returncode == 0 and report.get("error") is None, f"{report}\n{long_sts_job.log()}"

    # It wrote past the expiry of the credentials its table's FileIO was given, through that same
    # FileIO (the expiry it holds never changed): the writes after it went out with refreshed ones.
    expires = report["expires_at_ms"]
    inserts = report["inserts"]
    assert report["expires_at_ms_at_end"] == expires
    assert inserts[-1]["started_ms"] >= expires + MARGIN_S * 1000
    assert inserts[0]["finished_ms"] < expires - 300_000  # and before the provider's refresh began

    # Refreshed through loadCredentials, every call answered, the first ahead of the expiry (the
    # provider's refresh falls due between five minutes and one minute before it, and the job
    # inserts half a minute before it); nobody but the job talks to this server.
    refreshes = request_lines(long_sts_job, "loadCredentials")
    assert refreshes, "the job never called loadCredentials"
    assert {(doc["status"], doc["table"]) for doc in refreshes} == {(200, TABLE.rsplit(".", 1)[1])}
    assert min(epoch_ms(doc["ts"]) for doc in refreshes) < expires

    # Every insert the job reports is in the table, read by another client.
    catalog = RestCatalog("long", uri=long_sts_job.server.url, warehouse=WAREHOUSE, credential=TEST_CREDENTIAL)
    table = catalog.load_table(TABLE.split(".", 1)[1])
    written = table.scan().to_arrow().sort_by("id").to_pylist()
    assert written == [{"id": row["id"], "written_at_ms": row["started_ms"]} for row in inserts]
    assert [row["id"] for row in inserts] == list(range(len(inserts)))
    assert len(table.history()) == len(inserts)  # one snapshot per insert, none lost or doubled

    # Nothing was written outside the table's location.
    assert table.location() == report["location"]
    location = Location.parse(report["location"])
    assert location.bucket == TEST_BUCKET
    prefix = location.key.rstrip("/") + "/"
    keys = [found.object_name for found in long_sts_job.s3.client().list_objects(TEST_BUCKET, recursive=True)]
    assert keys and [key for key in keys if not key.startswith(prefix)] == []
    assert sum(key.endswith(".parquet") for key in keys) == len(inserts)
