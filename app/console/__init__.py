"""The console (issue 38): Growler's web UI at ``/ui/``, server-rendered by Flask and Jinja.

It is part of the edge: its views call the same services as the API's handlers (never SQL),
under the same authorizer, as the principal of the session cookie that app/edge/auth/console.py
verified. Pages work without JavaScript; the charts use uPlot, vendored under static/vendor.

Extension points (app/console/common.py): the navigation shows an entry for each optional part
whose service is a field of ``Services`` (app/composition/services.py; ``NAV_EXTENSIONS``: the recycle
bin, events, maintenance), and a table's page a section for each in ``TABLE_SECTIONS``; a feature
registers its views on ``blueprint`` (endpoint names as listed) and a section's loader in
``SECTION_LOADERS``, adds its template under templates/console/ and its service, and its entry
appears. Nothing shows while a service is absent, nor a section the caller may not read
(app/console/extras.py: the recycle bin page, a table's events and health; app/console/activity.py:
the change events page and the maintenance page).
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, send_from_directory

from app.console import activity, admin, audit, csrf, extras, pages, restrictions, tables
from app.console.common import NAV_EXTENSIONS, install_context

__all__ = ["FAVICON", "NAV_EXTENSIONS", "blueprint", "install"]

FAVICON = "/favicon.ico"
FAVICON_MAX_AGE_S = 86_400

blueprint = Blueprint("console", __name__, url_prefix="/ui", template_folder="templates", static_folder="static")
csrf.install(blueprint)
install_context(blueprint)
pages.register(blueprint)
tables.register(blueprint)
admin.register(blueprint)
extras.register(blueprint)
restrictions.register(blueprint)
audit.register(blueprint)
activity.register(blueprint)


def install(flask_app: Flask) -> None:
    """Register the console on the app (its templates autoescape: every value renders as text),
    and the site's icon at ``/favicon.ico``."""
    flask_app.register_blueprint(blueprint)
    flask_app.add_url_rule(FAVICON, "favicon", favicon, methods=["GET"])


def favicon() -> Response:
    """The console's icon where a browser asks for it unprompted: ``/favicon.ico``, served without
    authentication (AuthMiddleware's open paths: an icon tells nothing). It answered 401 with a
    JSON body before, and every console page logged an error for it in the browser's console.
    The pages name the same file under the console's static path (templates/console/base.html)."""
    assert blueprint.static_folder is not None
    return send_from_directory(blueprint.static_folder, "favicon.ico", max_age=FAVICON_MAX_AGE_S)
