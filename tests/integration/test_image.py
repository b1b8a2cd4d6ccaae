"""The OCI image (deploy/Containerfile), built with buildah on a base made from Debian's packages
(scripts/image.py: debootstrap, cached in .cache/image) and run with ``buildah run`` on the host's
network against the suite's PostgreSQL and SeaweedFS: its entry point serves, PyIceberg creates,
appends and reads a table through it, and its migration command is safe to run twice at once.

A warm run (base tagged, wheels downloaded, layers cached) rebuilds only the layers whose files
changed; the first run on a machine pays for debootstrap and the wheels.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from scripts import image as images
from scripts.processes import free_port
from storage.migrate import migration_files
from tests.conftest import TEST_CREDENTIAL
from tests.integration.bearer import BEARER
from tests.integration.conftest import server_env

pytestmark = pytest.mark.slow  # waits on restarts or builds: make test runs it in the slow part

TAG = "localhost/growler:test"


def _buildah() -> str:
    found = shutil.which("buildah")
    if found is None or shutil.which("debootstrap") is None:
        if os.environ.get("GROWLER_TEST_IMAGE_REQUIRED"):  # make test installed them: a failure
            pytest.fail("buildah/debootstrap not found although make test installs them")
        pytest.skip("buildah and debootstrap are not installed (make test installs Debian's packages)")
    return found


@pytest.fixture(scope="module")
def image() -> dict:
    _buildah()
    images.build(images.ensure_base(), TAG)
    inspected = subprocess.run(
        ["buildah", "inspect", "--type", "image", TAG], capture_output=True, text=True, check=True
    )
    return json.loads(inspected.stdout)["OCIv1"]["config"]


@pytest.fixture
def container(image) -> Iterator[str]:
    name = f"growler-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["buildah", "from", "--pull-never", "--name", name, TAG], capture_output=True, check=True)
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True)


def _run(container: str, command: list[str], env: dict[str, str] | None = None, **kwargs) -> list[str]:
    """The ``buildah run`` command line: chroot isolation, the host's network, the image's user."""
    flags = [f"--env={key}={value}" for key, value in (env or {}).items()]
    return ["buildah", "run", "--isolation", "chroot", "--network", "host", *flags, container, "--", *command]


def _growler_env(settings, bind: str) -> dict[str, str]:
    """What a deployment sets (GROWLER_*), not the test process's whole environment."""
    return {k: v for k, v in server_env(settings, bind).items() if k.startswith("GROWLER_") and v != ""}


def test_image_runs_as_non_root_without_compilers_or_test_code(image, container):
    assert image["User"] == "10001:10001"
    assert image["Entrypoint"] == ["python", "-m", "gunicorn", "-c", "/srv/growler/gunicorn.conf.py"]
    probe = (
        "id -u; python -c 'import sys; print(sys.version_info[:2])';"
        " for tool in gcc cc g++ make pip pip3; do command -v $tool; done;"
        " ls /srv/growler; python -c 'import pytest' 2>/dev/null && echo pytest-importable; true"
    )
    done = subprocess.run(_run(container, ["sh", "-c", probe]), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert lines[0] == "10001"
    assert "(3, 11)" in done.stdout
    assert not [line for line in done.stdout.splitlines() if line.startswith("/")], done.stdout  # no tool found
    assert sorted(done.stdout.splitlines()[2:]) == ["app", "gunicorn.conf.py", "handlers", "openapi", "storage"]
    assert "pytest-importable" not in done.stdout


def test_migrate_command_from_two_containers_at_once(image, services, settings):
    name = "img_" + uuid.uuid4().hex[:8]
    if services.postgres is not None:  # as in production: the catalog role owns one schema there
        services.postgres.create_catalog_database(name)
    else:
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    names = [f"growler-migrate-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for each in names:
            subprocess.run(["buildah", "from", "--pull-never", "--name", each, TAG], capture_output=True, check=True)

        def migrate(each: str) -> subprocess.CompletedProcess:
            command = _run(each, ["python", "-m", "storage.migrate"], {"GROWLER_DATABASE_URL": url})
            return subprocess.run(command, capture_output=True, text=True, timeout=120)

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(migrate, names))
        assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
        counts = sorted(int(r.stdout.split()[1]) for r in results)
        assert counts == [0, len(migration_files())]  # each file applied once, by one of them
        assert url.split("@")[0].split(":")[-1] not in "".join(r.stdout + r.stderr for r in results)  # no password
    finally:
        for each in names:
            subprocess.run(["buildah", "rm", each], capture_output=True)
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_pyiceberg_creates_appends_and_reads_through_the_image(image, container, settings, app, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = _growler_env(settings, f"127.0.0.1:{port}")
    command = _run(container, [*image["Entrypoint"], *(image.get("Cmd") or [])], env)
    log_path = tmp_path / "container.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    BEARER.register(url)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        assert httpx.get(f"{url}/healthz").json() == {"status": "alive"}
        catalog = RestCatalog(
            "image", uri=url, warehouse=settings.warehouse, credential=TEST_CREDENTIAL,
            **{"header.X-Iceberg-Access-Delegation": "vended-credentials"},
        )  # fmt: skip
        namespace = f"image_{uuid.uuid4().hex[:8]}"
        catalog.create_namespace(namespace)
        rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "item": pa.array(["tea", "mug", "pot"])})
        table = catalog.create_table(f"{namespace}.items", schema=rows.schema)
        table.append(rows)
        table.append(rows)
        read = catalog.load_table(f"{namespace}.items").scan().to_arrow()
        assert read.num_rows == 6
        assert sorted(read.column("item").to_pylist()) == sorted(["tea", "mug", "pot"] * 2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # gunicorn's graceful stop
            try:
                process.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    log = log_path.read_text(errors="replace")
    assert "Booting worker" in log
    assert settings.s3.secret_key not in log


def test_the_base_command_prints_the_image_name_alone_when_it_builds_one():
    """``make image`` reads the base's name from ``python -m scripts.image base``'s stdout. On a
    fresh machine that command builds the base, and debootstrap's and buildah's progress went to
    stdout with the name: the first ``make image`` failed, the second (nothing to build) passed.
    A tag no store holds yet is such a first run (from the cached rootfs, or debootstrap when
    there is none): the progress is on stderr, stdout is the name alone."""
    _buildah()
    tag = f"localhost/growler-base:first-run-{uuid.uuid4().hex[:8]}"
    assert not images.image_exists(tag)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scripts.image", "base", "--tag", tag],
            capture_output=True,
            text=True,
            cwd=images.REPO,
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        assert done.stdout == f"{tag}\n"
        assert "buildah bud" in done.stderr and "STEP" in done.stderr  # the build ran, its output on stderr
        assert images.image_exists(tag)
    finally:
        subprocess.run(["buildah", "rmi", tag], capture_output=True)
