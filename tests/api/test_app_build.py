"""What building the app says: nothing a newcomer's ``make run`` would read as a fault.

connexion serves a Swagger UI only with its ``swagger-ui`` extra, which Growler does not install;
left on, it warned "The swagger_ui directory could not be found" for each yaml in every worker.
"""

from __future__ import annotations

import logging

from tests.conftest import authenticated


def test_the_app_builds_without_warnings_and_serves_no_swagger_ui(settings, caplog):
    from app.edge.factory import create_app

    with caplog.at_level(logging.WARNING):
        # connexion builds its middleware (the Swagger UI's included) on the first request
        with authenticated(create_app(settings)).test_client() as client:
            assert client.get("/healthz").status_code == 200
            ui = client.get("/ui/")
            management_ui = client.get("/management/v1/ui/")
    warnings = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "swagger" in w.lower()], warnings
    assert ui.status_code == 404 and management_ui.status_code == 404
