"""connexion's request validation and argument parsing, used as a library by the dispatcher.

The dispatcher (``app.edge.dispatch``) reads most requests with the route table compiled from
the yaml (``app.edge.operations``). What that reader cannot read with certainty - a value it
does not coerce the way connexion does, an escaped path, an undeclared or repeated parameter, a
body that is large, not JSON, malformed or invalid - is read here, by connexion's own code on
the same yaml: its ``RequestValidationOperation`` (parameters, strict query, media type, body;
what it raises is connexion's problem, rendered by the app's error handlers into the same 400
and 415 bodies as ever), then its ``get_arguments`` for the handler's arguments. The request
does not go on to connexion's router or Flask: the dispatcher calls the handler, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connexion.decorators.parameter import get_arguments, sanitized
from connexion.lifecycle import ConnexionRequest
from connexion.middleware.request_validation import RequestValidationMiddleware, RequestValidationOperation
from connexion.operations import AbstractOperation
from connexion.utils import is_json_mimetype
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge.http import replay, whole_body
from app.edge.operations import Operation
from app.ground.limits import Limits, load_json


class ContractReader:
    """Every operation as connexion reads it: the operations connexion built for its own
    validation middleware (found once, in the app's middleware stack behind the dispatcher)."""

    def __init__(self, validator_map: dict[str, Any], limits: Limits) -> None:
        self._validator_map = validator_map
        self._limits = limits
        self._operations: dict[str, AbstractOperation] | None = None

    def find_operations(self, app: ASGIApp) -> None:
        """connexion's operations, from its validation middleware behind ``app``."""
        while not isinstance(app, RequestValidationMiddleware):
            app = app.app  # type: ignore[attr-defined] - each middleware of the stack holds the next
        self._operations = {
            operation_id: routed._operation  # noqa: SLF001 - connexion keeps its operation there
            for apis in app.apis.values()
            for api in apis
            for operation_id, routed in api.operations.items()
        }

    async def read(
        self,
        operation: Operation,
        scope: Scope,
        receive: Receive,
        path_values: list[str],
        handler: Callable[..., Any] | None,
    ) -> tuple[dict[str, Any], bytes]:
        """The handler's keyword arguments and the body's bytes, as connexion reads them; its
        problem (400, 415) when the request does not conform."""
        assert self._operations is not None, "find_operations runs before the first request"
        connexion_operation = self._operations[operation.operation_id]
        scope = {**scope, "path_params": dict(zip(operation.names, path_values, strict=True))}
        validated: list[tuple[Scope, Receive]] = []

        async def validated_request(scope: Scope, receive: Receive, _send: Send) -> None:
            validated.append((scope, receive))

        await RequestValidationOperation(
            validated_request,
            operation=connexion_operation,
            strict_validation=True,
            validator_map=self._validator_map,
        )(scope, receive, _no_send)
        scope, receive = validated[0]
        data = await whole_body(receive)
        request = ConnexionRequest(
            scope,
            replay(data, receive),
            uri_parser=connexion_operation.uri_parser_class(
                connexion_operation.parameters, connexion_operation.body_definition()
            ),
        )
        arguments, has_kwargs = _arguments(handler)
        kwargs = get_arguments(
            connexion_operation,
            path_params=request.path_params,
            query_params=request.query_params,
            body=self._body(request, data),
            files={},
            arguments=arguments,
            has_kwargs=has_kwargs,
            sanitize=sanitized,
            content_type=request.mimetype,
        )
        return {sanitized(key): value for key, value in kwargs.items()}, data

    def _body(self, request: ConnexionRequest, data: bytes) -> Any:
        """The body as connexion's Flask decorator gave it: JSON parsed (within the limits, as the
        app's JSON provider parses), else the bytes, None when empty."""
        if is_json_mimetype(request.content_type):
            if not data:
                return None
            try:
                return load_json(data, self._limits)
            except ValueError:
                return None
        return data or None


def _arguments(handler: Callable[..., Any] | None) -> tuple[list[str], bool]:
    if handler is None:
        return [], False
    from connexion.decorators.parameter import unwrap_decorators
    from connexion.utils import inspect_function_arguments

    return inspect_function_arguments(unwrap_decorators(handler))


async def _no_send(_message: Message) -> None:  # pragma: no cover - validation sends nothing
    raise AssertionError("request validation answers by raising")
