"""The services where no dispatcher hands them over: the console's Flask views and the probes.

The composition root (app/composition) builds ``Services`` once and keeps it in the Flask app;
the dispatcher hands it to every handler that names a ``services`` parameter, and the console
(Flask views, in Flask's app context) reaches it through ``services()``, never through the factory.
"""

from __future__ import annotations

from flask import current_app

from app.composition.services import SERVICES, Services

__all__ = ["Services", "services"]


def services() -> Services:
    return current_app.extensions[SERVICES]
