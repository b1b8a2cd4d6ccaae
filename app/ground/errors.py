"""The catalog's exceptions and their mapping to the Iceberg error model.

Every exception raised by the service layer knows its HTTP status and the Iceberg
error ``type`` that the Java (``ErrorHandlers``) and Python (``pyiceberg.catalog.rest``)
clients translate into their own exception classes. ``error_body`` is the single place
that shapes ``{"error": {"message", "type", "code"}}``.
"""

from __future__ import annotations

from typing import Any


class CatalogError(Exception):
    """Base class: an error the client is told about, never a stack trace."""

    code: int = 500
    error_type: str = "InternalServerError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def headers(self) -> dict[str, str]:
        return {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.error_type, self.code)


class BadRequest(CatalogError):
    code, error_type = 400, "BadRequestException"


class InvalidArgument(BadRequest):
    """Metadata the rules refuse (Java's builders: ``Preconditions.checkArgument``). The Java
    client maps this 400 to ``IllegalArgumentException``, as from Iceberg's reference catalog."""

    error_type = "IllegalArgumentException"


class ValidationFailed(BadRequest):
    """Metadata failing a validation (a partition field without its source column...); the Java
    client maps this 400 to ``ValidationException``."""

    error_type = "ValidationException"


def invalid_metadata(message: str, exc: BaseException) -> BadRequest:
    """The 400 for metadata the rules refuse, typed as Java's reference catalog types it:
    PyIceberg's ``ValidationError`` as ``ValidationException``, anything else as
    ``IllegalArgumentException``."""
    from pyiceberg.exceptions import ValidationError

    return (ValidationFailed if isinstance(exc, ValidationError) else InvalidArgument)(message)


class NotAuthorized(CatalogError):
    """No authenticated caller where authentication is on: what the authentication middleware
    answers for a request without a token (app/edge/auth/middleware.py), and what an enforcing
    authorizer raises when asked to decide for nobody (app/authorization.py) - a path that forgot
    to carry the caller is refused like an anonymous request, never allowed everything."""

    code, error_type = 401, "NotAuthorizedException"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}  # RFC 9110: a 401 names its scheme


class Forbidden(CatalogError):
    code, error_type = 403, "ForbiddenException"


class NotFound(CatalogError):
    """An unknown route; resources have their own, more specific types."""

    code, error_type = 404, "NotFoundException"


class NoSuchWarehouse(NotFound):
    error_type = "NoSuchWarehouseException"


class NoSuchNamespace(NotFound):
    error_type = "NoSuchNamespaceException"


class NoSuchTable(NotFound):
    error_type = "NoSuchTableException"


class NoSuchView(NotFound):
    error_type = "NoSuchViewException"


class NoSuchFunction(NotFound):
    error_type = "NoSuchFunctionException"


class UnsupportedOperation(CatalogError):
    """The spec's answer (406) for an operation this server does not implement."""

    code, error_type = 406, "UnsupportedOperationException"


class AlreadyExists(CatalogError):
    code, error_type = 409, "AlreadyExistsException"


class NamespaceNotEmpty(CatalogError):
    code, error_type = 409, "NamespaceNotEmptyException"


class Protected(CatalogError):
    """409: the entry, one of its namespaces or its warehouse carries a protection mark (issue 35):
    drop, purge, unregister, rename and recursive drop are refused for everyone, admins too."""

    code, error_type = 409, "ProtectedException"


class PurgeStarted(CatalogError):
    """409: a recycle bin unit's purge began (its retention ended with a purge asked, or an
    administrator purged it): it can no longer be undropped."""

    code, error_type = 409, "PurgeStartedException"


class LocationTaken(CatalogError):
    """409: a recycle bin unit's location was taken over since its drop - a live table, view or
    staged table holds it now (docs/recycle-bin.md): it cannot be undropped over it."""

    code, error_type = 409, "LocationTakenException"


class TableMoved(CatalogError):
    """A table moved home from a federated warehouse (docs/federation.md): what would lose a version
    or the files its remote copy reads - a drop while that copy stands, an undo after a commit."""

    code, error_type = 409, "TableMovedException"


class CommitFailed(CatalogError):
    """A requirement did not hold: the client refreshes and may retry."""

    code, error_type = 409, "CommitFailedException"


class RequestTimeout(CatalogError):
    """The request body did not arrive in full: the client went away, or was too slow and the
    protocol gave up on it (app/edge/protocol.py), which has already answered and closed."""

    code, error_type = 408, "BadRequestException"


class PayloadTooLarge(CatalogError):
    code, error_type = 413, "BadRequestException"


class Gone(CatalogError):
    """What a request continues from no longer exists (a change feed token past the retention)."""

    code, error_type = 410, "GoneException"


class UnprocessableEntity(CatalogError):
    code, error_type = 422, "UnprocessableEntityException"


class CommitStateUnknown(CatalogError):
    """The outcome of a commit cannot be known; clients must not clean up its files."""

    code, error_type = 500, "CommitStateUnknownException"


class ServiceUnavailable(CatalogError):
    """A dependency (PostgreSQL, object storage) is unreachable; retrying later may work."""

    code, error_type = 503, "ServiceUnavailableException"

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class BadGateway(CatalogError):
    """A federated warehouse's remote catalog answered something that is not the spec's shape
    (docs/federation.md): the request may or may not have taken effect there."""

    code, error_type = 502, "BadGatewayException"


MAX_MESSAGE_CHARS = 1000  # longest error message sent to a client


def truncate(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A message of bounded length: messages quote client input (names, values, whole updates)."""
    return message if len(message) <= limit else message[: limit - 15] + "... (truncated)"


def error_body(message: str, error_type: str, code: int) -> dict[str, Any]:
    """The spec's ``IcebergErrorResponse``, its message bounded (``truncate``)."""
    return {"error": {"message": truncate(message), "type": error_type, "code": code}}


# Status codes that reach us from routing/validation layers (connexion, Flask, our ASGI
# middleware) without a CatalogError, mapped to the error type clients expect.
ERROR_TYPE_BY_STATUS: dict[int, str] = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NotFoundException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    408: "BadRequestException",
    409: "AlreadyExistsException",
    413: "BadRequestException",
    415: "BadRequestException",
    431: "BadRequestException",
    422: "UnprocessableEntityException",
    503: "ServiceUnavailableException",
}


def error_type_for_status(status: int) -> str:
    if status in ERROR_TYPE_BY_STATUS:
        return ERROR_TYPE_BY_STATUS[status]
    return "BadRequestException" if 400 <= status < 500 else "InternalServerError"
