"""Principals in PostgreSQL: argon2id secrets, rotation, deletion, the bootstrap admin."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from app.edge.auth.config import AuthSettings
from app.management.principals import PrincipalService
from storage.db import Database
from storage.migrate import migrate
from storage.principals import PrincipalRepository


@pytest.fixture(scope="module")
def database(app, settings):
    # `app`: the schema is migrated
    db = Database(settings.database_url, max_size=2)
    db.open()
    yield db
    db.close()


@pytest.fixture
def principals(database) -> PrincipalService:
    return PrincipalService(PrincipalRepository(database))


def _client_id() -> str:
    return "p-" + uuid.uuid4().hex[:10]


def test_secret_is_stored_only_as_an_argon2id_hash(principals, db):
    credential = principals.create(_client_id())
    assert credential is not None and len(credential.secret) >= 32
    assert credential.secret not in repr(credential)
    (stored,) = db.execute("SELECT secret_hash FROM principal WHERE client_id = %s", (credential.client_id,)).fetchone()
    assert stored.startswith("$argon2id$") and credential.secret not in stored
    assert principals.authenticate(credential.client_id, credential.secret).generation == 1
    assert principals.authenticate(credential.client_id, credential.secret + "x") is None
    assert principals.authenticate(_client_id(), credential.secret) is None
    assert principals.create(credential.client_id) is None  # taken


def test_rotation_raises_the_generation_and_refuses_the_old_secret(principals):
    old = principals.create(_client_id())
    repository = principals.repository
    version = repository.version()
    new = principals.rotate(old.client_id)
    assert new.secret != old.secret
    assert principals.authenticate(old.client_id, old.secret) is None
    assert principals.authenticate(new.client_id, new.secret).generation == 2
    assert repository.states()[old.client_id].generation == 2
    assert repository.version() > version


def test_a_deleted_principal_cannot_authenticate_and_is_marked(principals):
    credential = principals.create(_client_id())
    assert principals.delete(credential.client_id)
    assert principals.authenticate(credential.client_id, credential.secret) is None
    assert principals.repository.states()[credential.client_id].deleted
    assert not principals.delete(credential.client_id)
    assert principals.rotate(credential.client_id) is None
    assert principals.create(credential.client_id) is None  # the id is not handed out again


def test_client_ids_that_spark_could_not_send_are_refused(principals):
    with pytest.raises(ValueError):
        principals.create("with:colon")


@pytest.fixture
def empty_catalog_database(services):
    name = "auth_" + uuid.uuid4().hex[:8]
    if services.postgres is not None:
        services.postgres.create_catalog_database(name)
    else:
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    migrate(url)
    db = Database(url, max_size=2)
    db.open()
    try:
        yield db
    finally:
        db.close()
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_bootstrap_admin_from_the_environment_once(empty_catalog_database):
    service = PrincipalService(PrincipalRepository(empty_catalog_database))
    settings = AuthSettings(key_password="k", bootstrap_client_id="boot", bootstrap_client_secret="boot-secret")
    assert service.bootstrap(settings).client_id == "boot"
    assert service.bootstrap(AuthSettings(key_password="k")) is None  # principals exist: nothing more
    row = service.authenticate("boot", "boot-secret")
    assert row is not None and row.is_admin


def test_generated_bootstrap_admin_is_printed_once(empty_catalog_database, capsys):
    service = PrincipalService(PrincipalRepository(empty_catalog_database))
    credential = service.bootstrap(AuthSettings(key_password="k"))
    printed = capsys.readouterr().err
    assert credential.client_id == "admin" and credential.secret in printed
    assert service.bootstrap(AuthSettings(key_password="k")) is None
    assert credential.secret not in capsys.readouterr().err
    assert service.authenticate("admin", credential.secret).is_admin


def test_the_principals_command(settings, app, monkeypatch, capsys):
    from scripts.principals import main

    monkeypatch.setenv("GROWLER_DATABASE_URL", settings.database_url)
    client_id = _client_id()
    assert main(["create", client_id]) == 0
    first = capsys.readouterr().out.strip()
    assert first.startswith(f"{client_id}:")
    assert main(["rotate", client_id]) == 0
    second = capsys.readouterr().out.strip()
    assert second != first and second.startswith(f"{client_id}:")
    assert main(["list"]) == 0
    assert f"{client_id}\tgeneration 2" in capsys.readouterr().out
    assert main(["delete", client_id]) == 0
    assert main(["delete", client_id]) == 1
    monkeypatch.setenv("GROWLER_TOKEN_KEY_PASSWORD", "growler-test-key-password")
    monkeypatch.setenv("GROWLER_TOKEN_TTL_S", "3600")
    assert main(["rotate-key"]) == 0
    assert "new signing key" in capsys.readouterr().out


def test_a_principal_created_just_after_a_reload_is_accepted_at_once(database):
    """A worker reloaded its state a moment before the principal was created: the principal's
    first token must not be answered 401 until the next poll (a client that creates a principal
    and uses it at once). The verifier reloads as soon as the poll interval allows, and waits for that.

    "At most one poll interval" is asserted in what the verifier did - one wait of at most
    ``poll_s``, then at most one reload - not in seconds of wall time, which a slow or busy machine stretches.
    """
    import asyncio
    import threading

    from app.edge.auth import Authentication
    from tests.conftest import auth_settings_for_tests

    auth = Authentication(auth_settings_for_tests(poll_s=2.0), database)
    auth.start()
    poller = auth.state._thread  # its own waits and reloads are not the verifier's
    waits: list[float | None] = []
    reloads: list[bool] = []
    wait, reload = auth.state._stop.wait, auth.state.reload

    def counted_wait(timeout: float | None = None) -> bool:
        if threading.current_thread() is not poller:
            waits.append(timeout)
        return wait(timeout)

    def counted_reload(force: bool = False) -> bool:
        if threading.current_thread() is not poller:
            reloads.append(force)
        return reload(force)

    try:
        auth.state.reload(force=True)  # the last load: just now
        credential = auth.principals.create(_client_id())
        token, _ = auth.issuer.issue(
            credential.client_id, auth.principals.repository.get(credential.client_id).generation
        )
        auth.state._stop.wait, auth.state.reload = counted_wait, counted_reload  # the poll thread's too
        principal = asyncio.run(auth.verifier.verify(token))
        assert principal.name == credential.client_id
        assert len(waits) <= 1 and all(timeout is not None and timeout <= 2.0 for timeout in waits), waits
        # then at most one reload, forced (none if the poll's own reload, due meanwhile, found it)
        assert reloads in ([], [True]), reloads
    finally:
        auth.state._stop.wait, auth.state.reload = wait, reload
        auth.stop()
