"""Maps each operationId of a yaml to its handler function by naming convention.

``loadTable`` -> a function ``load_table`` in one of the API's ``handlers`` modules. The
dispatcher (``app.edge.dispatch``) is the only caller of handlers; connexion is given the same
yaml for its app object (unknown routes, wrong methods) and routes each operation to
``dispatched``, which the dispatcher in front of it never lets it reach. Operations with no
handler answer 406 ``UnsupportedOperationException`` and are left out of the ``endpoints`` that
``/v1/config`` advertises.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from typing import Any

from connexion.resolver import Resolution, Resolver

# getToken (POST /v1/oauth/tokens) has no handler module: when Growler issues tokens the
# authentication middleware answers it in front of the dispatcher (app/edge/auth/endpoint.py).
HANDLER_MODULES = ("config", "namespaces", "tables", "views", "transactions", "scans", "functions", "events")
MANAGEMENT_MODULES = ("management",)


def handler_name(operation_id: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", operation_id).lower()


def find_handler(operation_id: str, modules: tuple[str, ...] = HANDLER_MODULES) -> Callable[..., Any] | None:
    name = handler_name(operation_id)
    found = []
    for module_name in modules:
        module = importlib.import_module(f"handlers.{module_name}")
        if callable(getattr(module, name, None)):
            found.append(getattr(module, name))
    if len(found) > 1:
        raise RuntimeError(f"operation {operation_id} has handlers in several modules")
    return found[0] if found else None


HTTP_METHODS = ("get", "put", "post", "delete", "head", "patch")


def implemented_endpoints(spec: dict[str, Any]) -> list[str]:
    """``"METHOD /path"`` for every operation of the spec that has a handler, as /v1/config lists them."""
    return sorted(
        f"{method.upper()} {path}"
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS and find_handler(operation["operationId"]) is not None
    )


def idempotent_operations(spec: dict[str, Any]) -> set[str]:
    """operationIds whose operation declares the ``Idempotency-Key`` header."""
    shared = spec.get("components", {}).get("parameters", {})

    def resolve(parameter: dict[str, Any]) -> dict[str, Any]:
        ref = parameter.get("$ref", "")
        return shared.get(ref.rsplit("/", 1)[-1], {}) if ref else parameter

    return {
        operation["operationId"]
        for item in spec["paths"].values()
        for method, operation in item.items()
        if method in HTTP_METHODS
        and any(
            resolve(p).get("in") == "header" and resolve(p).get("name", "").lower() == "idempotency-key"
            for p in operation.get("parameters", [])
        )
    }


def handlers_of(
    spec: dict[str, Any], modules: tuple[str, ...], serialize: Callable[[Any], str] | None = None
) -> dict[str, Callable[..., Any] | None]:
    """Every operation of ``spec`` with its handler as the dispatcher calls it: behind the
    idempotency replay where the operation takes an ``Idempotency-Key``; None if it has none."""
    idempotent_ids = idempotent_operations(spec)
    found: dict[str, Callable[..., Any] | None] = {}
    for item in spec["paths"].values():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            operation_id = operation["operationId"]
            handler = find_handler(operation_id, modules)
            if handler is not None and operation_id in idempotent_ids:
                from app.edge.idempotency import idempotent  # the app's modules, once the app is built

                handler = idempotent(operation_id, handler, serialize or _compact_json)
            found[operation_id] = handler
    return found


def _compact_json(value: Any) -> str:
    """The app's serialiser where none is given (tools listing the handlers)."""
    return json.dumps(value, separators=(",", ":"))


class DispatchedResolver(Resolver):
    """connexion's resolution of every operation: to ``dispatched`` (the dispatcher answers them)."""

    def resolve(self, operation: Any) -> Resolution:
        return Resolution(dispatched, operation.operation_id)


def dispatched(*_args: Any, **_kwargs: Any) -> Any:
    """Never called: the dispatcher in front of connexion answers every operation of its yamls."""
    raise RuntimeError("an operation reached connexion's app: the dispatcher answers every operation")
