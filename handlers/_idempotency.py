"""Wraps the handler of every operation that declares an ``Idempotency-Key`` header."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import Response, current_app, make_response, request

from app.factory import IDEMPOTENCY
from app.idempotency import IdempotencyService, StoredResponse, fingerprint, parse_key

KEPT_HEADERS = ("Content-Type", "ETag")


def idempotent(operation_id: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(handler)
    def with_idempotency_key(*args: Any, **kwargs: Any) -> Any:
        raw_key = request.headers.get("Idempotency-Key")
        if not raw_key:
            return handler(*args, **kwargs)

        def run() -> StoredResponse:
            response = make_response(handler(*args, **kwargs))
            headers = {name: response.headers[name] for name in KEPT_HEADERS if name in response.headers}
            return StoredResponse(response.status_code, headers, response.get_data())

        service: IdempotencyService = current_app.extensions[IDEMPOTENCY]
        request_fingerprint = fingerprint(request.method, request.path, request.get_data())
        stored, replayed = service.run_once(parse_key(raw_key), operation_id, request_fingerprint, run)
        response = Response(stored.body, status=stored.status)
        response.headers.clear()
        response.headers.update(stored.headers)
        if replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return response

    return with_idempotency_key
