"""What building the app says: nothing a newcomer's ``make run`` would read as a fault.

connexion serves a Swagger UI only with its ``swagger-ui`` extra, which Growler does not install;
left on, it warned "The swagger_ui directory could not be found" for each yaml in every worker.
Its spec routes are off too: they answered the catalog's spec with a 500 (recursive schemas).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import authenticated

REPO = Path(__file__).resolve().parents[2]


def test_the_app_builds_without_warnings_and_serves_no_swagger_ui(settings, caplog):
    from app.edge.factory import create_app

    with caplog.at_level(logging.WARNING):
        # connexion builds its middleware (the Swagger UI's included) on the first request
        with authenticated(create_app(settings)).test_client() as client:
            assert client.get("/healthz").status_code == 200
            ui = client.get("/ui/")
            management_ui = client.get("/management/v1/ui/")
            # connexion's spec routes served the catalog's resolved (recursive) spec as a 500
            specs = [
                client.get(path)
                for path in ("/openapi.json", "/openapi.yaml", "/management/v1/openapi.json", "/v1/openapi.json")
            ]
    warnings = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "swagger" in w.lower()], warnings
    # /ui/ is Growler's console (its sign-in page for a caller without a session), not Swagger's
    assert ui.status_code == 200 and "sign-in-form" in ui.text and "swagger" not in ui.text.lower()
    assert management_ui.status_code == 404
    for spec in specs:
        assert spec.status_code == 404 and spec.json()["error"]["type"] == "NotFoundException", spec.text


def test_a_worker_imports_connexion_without_a_deprecation_warning(tmp_path):
    """connexion imports starlette's TestClient, which warns that its httpx support is deprecated:
    gunicorn.conf.py, read by the master before it forks the workers, silences that one warning."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROWLER_", "PYTHON"))}
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
    code = "import runpy; runpy.run_path('gunicorn.conf.py'); import connexion, starlette.testclient"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
