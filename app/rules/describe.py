"""How the rules word a parsing or validation error for a client: one line, for tables and views."""

from __future__ import annotations

from pydantic import ValidationError as PydanticValidationError


def describe_error(exc: BaseException) -> str:
    """A one-line, client-facing account of a parsing/validation error (tables and views)."""
    if isinstance(exc, PydanticValidationError):
        parts = []
        for error in exc.errors(include_url=False):
            location = ".".join(str(part) for part in error["loc"])
            parts.append(f"{location}: {error['msg']}" if location else error["msg"])
        return "; ".join(parts)
    if isinstance(exc, KeyError):
        return f"missing field {exc}"
    return str(exc)
