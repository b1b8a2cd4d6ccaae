"""Each catalog error maps to the status and Iceberg type the Java and Python clients expect."""

from __future__ import annotations

import pytest

from app.ground import errors


@pytest.mark.parametrize(
    "cls, code, error_type",
    [
        (errors.BadRequest, 400, "BadRequestException"),
        (errors.Forbidden, 403, "ForbiddenException"),
        (errors.NoSuchWarehouse, 404, "NoSuchWarehouseException"),
        (errors.NoSuchNamespace, 404, "NoSuchNamespaceException"),
        (errors.NoSuchTable, 404, "NoSuchTableException"),
        (errors.NoSuchView, 404, "NoSuchViewException"),
        (errors.UnsupportedOperation, 406, "UnsupportedOperationException"),
        (errors.AlreadyExists, 409, "AlreadyExistsException"),
        (errors.NamespaceNotEmpty, 409, "NamespaceNotEmptyException"),
        (errors.CommitFailed, 409, "CommitFailedException"),
        (errors.UnprocessableEntity, 422, "UnprocessableEntityException"),
        (errors.CommitStateUnknown, 500, "CommitStateUnknownException"),
        (errors.ServiceUnavailable, 503, "ServiceUnavailableException"),
    ],
)
def test_error_mapping(cls, code, error_type):
    exc = cls("went wrong")
    assert exc.body() == {"error": {"message": "went wrong", "type": error_type, "code": code}}


def test_service_unavailable_says_when_to_retry():
    assert errors.ServiceUnavailable("down", retry_after=7).headers() == {"Retry-After": "7"}
    assert errors.BadRequest("x").headers() == {}


def test_status_fallback_types():
    assert errors.error_type_for_status(404) == "NotFoundException"
    assert errors.error_type_for_status(418) == "BadRequestException"
    assert errors.error_type_for_status(502) == "InternalServerError"
