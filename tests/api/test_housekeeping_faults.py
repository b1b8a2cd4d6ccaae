"""Housekeeping handles each row on its own: a poison row never stops the others."""

from __future__ import annotations

import threading
import uuid

from app.composition.services import services_of
from app.ground.locations import Location
from app.housekeeping import RETRY_BASE_SECONDS, Housekeeper
from storage.idempotency import IdempotencyRepository
from tests.conftest import TEST_BUCKET

# A location the store can never delete from: its bucket does not exist.
POISON = "s3://growler-no-such-bucket/warehouse/db/t/metadata/00001-poison.metadata.json"


def housekeeper(app) -> Housekeeper:
    tables = services_of(app.app).tables
    return Housekeeper(
        tables.repository, tables.objects, IdempotencyRepository(tables.repository.db), threading.Event()
    )


def failures(client, task: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'growler_housekeeping_failures_total{{task="{task}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_poison_pending_row_does_not_stop_the_sweeper_nor_key_expiry(client, app, db):
    tables = services_of(app.app).tables
    orphans = [f"s3://{TEST_BUCKET}/swept/{uuid.uuid4().hex}-{n}.metadata.json" for n in range(3)]
    expired_key = str(uuid.uuid4())
    # Counted before the poison row exists: the app's own housekeeping thread may fail on it (and
    # put it off) before this test's round does, and either failure must be seen.
    before = failures(client, "sweep")
    try:
        # the poison row is the oldest, so a sweeper stopping at the first failure sweeps nothing
        tables.repository.record_pending([POISON])
        db.execute("UPDATE pending_object SET created_at = now() - interval '3 hours' WHERE location = %s", (POISON,))
        for orphan in orphans:
            tables.repository.record_pending([orphan])
            tables.objects.write_new(Location.parse(orphan), b"{}")
        db.execute(
            "UPDATE pending_object SET created_at = now() - interval '2 hours' WHERE location = ANY(%s)", (orphans,)
        )
        db.execute(
            "INSERT INTO idempotency_key (key, operation, fingerprint, state, expires_at)"
            " VALUES (%s, 'createTable', 'x', 'done', now() - interval '1 minute')",
            (expired_key,),
        )
        result = housekeeper(app).run_round(pending_grace_s=3600)

        # (the app's own housekeeping thread may get there first: assert outcomes, not counts)
        assert result["swept"] >= 0 and result["expired-keys"] >= 0, result
        assert not any(tables.objects.exists(Location.parse(orphan)) for orphan in orphans)
        assert db.execute("SELECT count(*) FROM pending_object WHERE location = ANY(%s)", (orphans,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM idempotency_key WHERE key = %s", (expired_key,)).fetchone()[0] == 0
        # the poison row is kept, counted, and put off rather than retried at once
        attempts, error, delay = db.execute(
            "SELECT attempts, last_error, extract(epoch FROM next_attempt_at - now()) FROM pending_object"
            " WHERE location = %s",
            (POISON,),
        ).fetchone()
        assert attempts >= 1 and error
        assert RETRY_BASE_SECONDS / 2 < delay <= RETRY_BASE_SECONDS * 2**attempts
        assert failures(client, "sweep") >= before + 1

        # the next round does not touch it (not due yet) and still does everything else
        orphan = f"s3://{TEST_BUCKET}/swept/{uuid.uuid4().hex}.metadata.json"
        tables.repository.record_pending([orphan])
        tables.objects.write_new(Location.parse(orphan), b"{}")
        db.execute("UPDATE pending_object SET created_at = now() - interval '2 hours' WHERE location = %s", (orphan,))
        housekeeper(app).run_round(pending_grace_s=3600)
        assert not tables.objects.exists(Location.parse(orphan))
        row = db.execute("SELECT attempts FROM pending_object WHERE location = %s", (POISON,)).fetchone()
        assert row[0] == attempts

        # when it is due again, it is retried, and its delay grows
        db.execute("UPDATE pending_object SET next_attempt_at = now() WHERE location = %s", (POISON,))
        housekeeper(app).sweep_pending(grace_s=3600)
        again, delay_again = db.execute(
            "SELECT attempts, extract(epoch FROM next_attempt_at - now()) FROM pending_object WHERE location = %s",
            (POISON,),
        ).fetchone()
        assert again == attempts + 1 and delay_again > delay
    finally:
        db.execute("DELETE FROM pending_object WHERE location = ANY(%s)", ([POISON, *orphans],))


def test_a_failing_purge_job_is_put_off_and_the_rest_of_the_round_runs(client, app, db):
    expired_key = str(uuid.uuid4())
    job_id = db.execute(
        "INSERT INTO purge_job (location) VALUES ('s3://growler-no-such-bucket/warehouse/db/gone') RETURNING id"
    ).fetchone()[0]
    try:
        db.execute(
            "INSERT INTO idempotency_key (key, operation, fingerprint, state, expires_at)"
            " VALUES (%s, 'createTable', 'x', 'done', now() - interval '1 minute')",
            (expired_key,),
        )
        housekeeper(app).run_round(pending_grace_s=3600)
        attempts, error, due_in = db.execute(
            "SELECT attempts, last_error, extract(epoch FROM not_before - now()) FROM purge_job WHERE id = %s",
            (job_id,),
        ).fetchone()
        assert attempts == 1 and error and 0 < due_in <= RETRY_BASE_SECONDS
        assert db.execute("SELECT count(*) FROM idempotency_key WHERE key = %s", (expired_key,)).fetchone()[0] == 0
    finally:
        db.execute("DELETE FROM purge_job WHERE id = %s", (job_id,))
