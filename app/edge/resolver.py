"""Maps each operationId in the yaml to a handler function by naming convention.

``loadTable`` -> a function ``load_table`` in one of the ``handlers`` modules. Operations with
no handler answer 406 ``UnsupportedOperationException`` and are left out of the
``endpoints`` that ``/v1/config`` advertises.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from connexion.resolver import Resolution, Resolver

from app.ground.errors import UnsupportedOperation

# getToken (POST /v1/oauth/tokens) has no handler module: when Growler issues tokens the
# authentication middleware answers it in front of connexion (app/edge/auth/endpoint.py).
HANDLER_MODULES = ("config", "namespaces", "tables", "views", "transactions", "scans", "functions", "events")


def handler_name(operation_id: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", operation_id).lower()


def find_handler(operation_id: str) -> Callable[..., Any] | None:
    name = handler_name(operation_id)
    found = []
    for module_name in HANDLER_MODULES:
        module = importlib.import_module(f"handlers.{module_name}")
        if callable(getattr(module, name, None)):
            found.append(getattr(module, name))
    if len(found) > 1:
        raise RuntimeError(f"operation {operation_id} has handlers in several modules")
    return found[0] if found else None


def not_implemented(operation_id: str) -> Callable[..., Any]:
    def unsupported(*_args: Any, **_kwargs: Any) -> Any:
        raise UnsupportedOperation(f"Operation {operation_id} is not supported by this catalog")

    unsupported.__name__ = handler_name(operation_id)
    return unsupported


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


class CatalogResolver(Resolver):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.idempotent = idempotent_operations(spec)

    def resolve(self, operation: Any) -> Resolution:
        operation_id = operation.operation_id
        return Resolution(self.handler(operation_id) or not_implemented(operation_id), operation_id)

    def handler(self, operation_id: str) -> Callable[..., Any] | None:
        """The handler as every door calls it: behind the authorization check, then the
        idempotency replay where the operation takes an ``Idempotency-Key``; None if none exists."""
        handler = find_handler(operation_id)
        if handler is None:
            return None
        if operation_id in self.idempotent:
            from app.edge.idempotency import idempotent

            handler = idempotent(operation_id, handler)
        from app.edge.context import authorized  # the app's modules, once the resolver runs

        return authorized(operation_id, handler)


class ManagementResolver(Resolver):
    """The management API's operations (openapi/management.yaml): all in ``handlers.management``."""

    def resolve(self, operation: Any) -> Resolution:
        module = importlib.import_module("handlers.management")
        return Resolution(getattr(module, handler_name(operation.operation_id)), operation.operation_id)
