"""Bounded work per request: JSON parsed within limits, request shapes capped, gzip inflated bounded.

Every JSON document Growler accepts from outside - request bodies, registered metadata files -
goes through ``load_json`` so that no input can cost more than its size suggests or reach the
catalog in a form other components choke on:

- nesting deeper than ``max_json_depth`` is refused (Python's parser would raise RecursionError
  around depth 1000, and every recursive walk after it - jsonschema, pydantic - costs per level);
- number literals longer than ``max_number_length`` characters, integers outside the signed
  64-bit range (Java clients read every Iceberg number into a ``long`` or ``int``), ``NaN`` and
  ``Infinity`` (not JSON) and floats that overflow to infinity are refused; members that Iceberg
  types as ``int`` (ids of schemas, fields, specs, sort orders, versions, ...) must fit 32 bits;
- strings holding a lone UTF-16 surrogate (``"\\ud800"``) are refused: they cannot be encoded as
  UTF-8, so PostgreSQL, S3 and every client would fail on them later.

- objects and arrays of a request body have at most ``max_json_items`` entries.

Parsing is done so that a large body does not hold the GIL for long: the parser calls back into
Python for every object and number, and documents over ``LARGE_DOCUMENT_CHARS`` are read by the
json module's Python scanner, so the event loop gets its turn between values (one C-level
``json.loads`` of 8 MiB would hold the GIL for a few hundred ms). The item cap bounds the
C-level work done later on one container (``json.dumps`` of a properties map, ...).

``check_request_shape`` caps what a body asks the service to do (updates and requirements per
commit, table changes per transaction, fields per schema) before the slower jsonschema and
pydantic validation runs. ``inflate`` decompresses gzip incrementally and stops at a bound, so a
gzip bomb costs at most the bound in memory.
"""

from __future__ import annotations

import json
import json.scanner
import math
import zlib
from dataclasses import dataclass
from typing import Any

from app.ground.errors import BadRequest, PayloadTooLarge, truncate

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Members whose value Iceberg types as a 32-bit ``int`` (or a list of them), in table and view
# metadata, requests, updates and requirements. Other integers must fit 64 bits.
INT32_MEMBERS = frozenset(
    {
        "id",
        "element-id",
        "key-id",
        "value-id",
        "identifier-field-ids",
        "schema-id",
        "current-schema-id",
        "schema-ids",
        "last-column-id",
        "last-assigned-field-id",
        "spec-id",
        "default-spec-id",
        "spec-ids",
        "last-partition-id",
        "last-assigned-partition-id",
        "order-id",
        "sort-order-id",
        "default-sort-order-id",
        "source-id",
        "source-ids",
        "field-id",
        "format-version",
        "version-id",
        "current-version-id",
        "min-snapshots-to-keep",
        "fields",
    }
)


@dataclass(frozen=True)
class Limits:
    """The caps (``GROWLER_MAX_*`` settings; docs/security.md, "Limits")."""

    max_json_depth: int = 100  # a struct in a struct takes 3 levels: 30 levels of nested structs
    max_json_items: int = 20_000
    max_number_length: int = 40
    max_updates: int = 5000
    max_requirements: int = 1000
    max_table_changes: int = 1000
    max_schema_fields: int = 20_000
    max_metadata_bytes: int = 64 * 1024 * 1024
    max_inflated_bytes: int = 128 * 1024 * 1024

    def check(self) -> None:
        if not 2 <= self.max_json_depth <= 160:  # deeper, jsonschema's recursion runs out of stack
            raise ValueError("GROWLER_MAX_JSON_DEPTH must be between 2 and 160")
        if not 20 <= self.max_number_length <= 4000:  # int64 needs 20; Python refuses > 4300 digits
            raise ValueError("GROWLER_MAX_NUMBER_LENGTH must be between 20 and 4000")
        values = (
            self.max_json_items,
            self.max_updates,
            self.max_requirements,
            self.max_table_changes,
            self.max_schema_fields,
            self.max_metadata_bytes,
            self.max_inflated_bytes,
        )
        if min(values) < 1:
            raise ValueError("the GROWLER_MAX_* limits must be positive")


class _Refused(ValueError):
    """Raised from the parser's hooks; carries the client-facing message."""


# Documents larger than this are parsed by the json module's Python scanner (its C string
# scanner still does the strings): slower, but it lets other threads - the event loop - run
# between any two values, where one C-level ``json.loads`` of megabytes holds the GIL throughout.
LARGE_DOCUMENT_CHARS = 256 * 1024


def load_json(text: str | bytes, limits: Limits, what: str = "request body", *, items: bool = True) -> Any:
    """Parse ``text`` within ``limits``; anything else is a 400 naming the rule it broke.

    ``items=False`` leaves out the cap on members/elements per object/array (registered metadata
    files list every snapshot of a table's history).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"The {what} is not valid UTF-8") from exc
    max_length = limits.max_number_length

    def parse_int(literal: str) -> int:
        if len(literal) > max_length:
            raise _Refused(f"a number in the {what} is longer than {max_length} characters")
        value = int(literal)
        if not INT64_MIN <= value <= INT64_MAX:
            raise _Refused(f"the integer {literal} in the {what} is outside the signed 64-bit range")
        return value

    def parse_float(literal: str) -> float:
        if len(literal) > max_length:
            raise _Refused(f"a number in the {what} is longer than {max_length} characters")
        value = float(literal)
        if math.isinf(value):
            raise _Refused(f"the number {literal} in the {what} is too large for a double")
        return value

    def parse_constant(literal: str) -> float:
        raise _Refused(f"{literal} is not a JSON value")

    decoder = json.JSONDecoder(
        parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant, object_hook=_object
    )
    if len(text) > LARGE_DOCUMENT_CHARS:
        decoder.scan_once = json.scanner.py_make_scanner(decoder)
    try:
        value = decoder.decode(text)
    except _Refused as exc:
        raise BadRequest(f"Invalid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest(f"Invalid JSON: the {what} is nested deeper than {limits.max_json_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise BadRequest(truncate(f"Invalid JSON in the {what}: {exc}")) from None
    except ValueError as exc:  # int() of a literal Python refuses to convert
        raise BadRequest(f"Invalid JSON: a number in the {what} cannot be read ({type(exc).__name__})") from None
    _check_tree(value, limits.max_json_depth, limits.max_json_items if items else None, what)
    if "\\ud" in text or "\\uD" in text:  # only an escape can carry a surrogate past UTF-8 decoding
        _check_no_lone_surrogates(value, what)
    return value


def _object(value: dict[str, Any]) -> dict[str, Any]:
    """A Python-level hook: with the C scanner, each object is a point where other threads may run."""
    return value


def _check_tree(value: Any, max_depth: int, max_items: int | None, what: str) -> None:
    """Depth (iteratively, no recursion), container sizes and the 32-bit members, in one pass."""
    stack = [(value, 1)] if type(value) is dict or type(value) is list else []
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise BadRequest(f"Invalid JSON: the {what} is nested deeper than {max_depth} levels")
        if max_items is not None and len(node) > max_items:
            raise BadRequest(f"Invalid JSON: an object or array in the {what} has more than {max_items} entries")
        if type(node) is dict:
            for key, item in node.items():
                kind = type(item)
                if kind is dict:
                    stack.append((item, depth + 1))
                elif kind is list:
                    stack.append((item, depth + 1))
                    if key in INT32_MEMBERS:
                        for element in item:
                            if type(element) is int and not INT32_MIN <= element <= INT32_MAX:
                                raise _int32_error(key, element, what)
                elif kind is int and key in INT32_MEMBERS and not INT32_MIN <= item <= INT32_MAX:
                    raise _int32_error(key, item, what)
        elif type(node) is list:
            for item in node:
                if type(item) is dict or type(item) is list:
                    stack.append((item, depth + 1))


def _int32_error(key: str, value: int, what: str) -> BadRequest:
    return BadRequest(f"Invalid JSON: {key!r} in the {what} must be a 32-bit integer, got {value}")


def _check_no_lone_surrogates(value: Any, what: str) -> None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"Invalid JSON: the {what} contains a lone UTF-16 surrogate (\\ud800-\\udfff)") from None


# -- what a request asks for ------------------------------------------------------------------


def check_request_shape(body: Any, limits: Limits) -> None:
    """Caps on the work a (parsed) request body asks for, checked before any slower validation.

    Keyed by member names, the same for every operation: ``updates``/``requirements`` of a
    table or view commit, ``table-changes`` of a transaction (whose updates count together), and
    the ``schema`` of a create request or an ``add-schema`` update.
    """
    if not isinstance(body, dict):
        return
    changes = body.get("table-changes")
    commits = [body]
    if isinstance(changes, list):
        if len(changes) > limits.max_table_changes:
            raise BadRequest(f"A transaction may change at most {limits.max_table_changes} tables, got {len(changes)}")
        commits = [change for change in changes if isinstance(change, dict)]
    total_updates = 0
    for commit in commits:
        updates = commit.get("updates")
        requirements = commit.get("requirements")
        if isinstance(requirements, list) and len(requirements) > limits.max_requirements:
            raise BadRequest(
                f"A commit may have at most {limits.max_requirements} requirements, got {len(requirements)}"
            )
        if isinstance(updates, list):
            total_updates += len(updates)
            if total_updates > limits.max_updates:
                raise BadRequest(f"A commit may have at most {limits.max_updates} updates, got more")
            for update in updates:
                if isinstance(update, dict) and update.get("action") == "add-schema":
                    check_schema_size(update.get("schema"), limits)
    check_schema_size(body.get("schema"), limits)


def check_schema_size(schema: Any, limits: Limits) -> None:
    """Fields of one schema, nested ones included (struct fields, list elements, map keys/values)."""
    count = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        fields = node.get("fields")
        if isinstance(fields, list):
            count += len(fields)
            stack.extend(field.get("type") for field in fields if isinstance(field, dict))
        for member in ("element", "key", "value"):
            if isinstance(node.get(member), dict):
                count += 1
                stack.append(node[member])
        if count > limits.max_schema_fields:
            raise BadRequest(f"A schema may have at most {limits.max_schema_fields} fields (nested included)")


def check_metadata_schemas(document: Any, limits: Limits) -> None:
    """Registered table/view metadata: every schema it carries within the field cap."""
    if not isinstance(document, dict):
        return
    schemas = document.get("schemas")
    for schema in [*(schemas if isinstance(schemas, list) else []), document.get("schema")]:
        check_schema_size(schema, limits)


# -- gzip -------------------------------------------------------------------------------------

_INFLATE_STEP = 1024 * 1024


def inflate(data: bytes, max_bytes: int, what: str = "metadata file") -> bytes:
    """gunzip ``data`` (concatenated members too) without ever holding more than ``max_bytes``.

    ``gzip.decompress`` inflates everything first: a few MiB of zeros become gigabytes.
    Decompressing in steps with ``max_length`` stops as soon as the output passes the bound.
    """
    out: list[bytes] = []
    size = 0
    pending = data
    while pending:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = inflater.decompress(pending, _INFLATE_STEP)
            while True:
                size += len(chunk)
                if size > max_bytes:
                    raise PayloadTooLarge(f"The {what} inflates to more than {max_bytes} bytes")
                out.append(chunk)
                if inflater.eof or (not inflater.unconsumed_tail and len(chunk) < _INFLATE_STEP):
                    break  # done, or the input ran out (truncated: checked below)
                chunk = inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP)
        except zlib.error as exc:
            raise BadRequest(f"The {what} is not valid gzip") from exc
        if not inflater.eof:
            raise BadRequest(f"The {what} is truncated gzip")
        pending = inflater.unused_data
    return b"".join(out)


# -- encoding ---------------------------------------------------------------------------------

_LARGE_VALUE_NODES = 2000
_LARGE_VALUE_CHARS = 256 * 1024


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps``, except that a large value is encoded by the json module's Python encoder.

    The C encoder holds the GIL for the whole document: 8 MiB of namespace properties, encoded
    for PostgreSQL and again for the response, kept the event loop waiting 150 ms and more each
    time. The Python encoder yields between values (its strings are still escaped in C); small
    values - nearly all of them - keep the C encoder's speed.
    """
    instance = _encoder(kwargs.pop("cls", None) or json.JSONEncoder, kwargs)
    if not _is_large(value):
        return instance.encode(value)
    return "".join(instance.iterencode(value))


_ENCODERS: dict[tuple[Any, ...], json.JSONEncoder] = {}
_MAX_ENCODERS = 32


def _encoder(cls: type[json.JSONEncoder], options: dict[str, Any]) -> json.JSONEncoder:
    """One encoder per class and options, built once: building one per call was a visible share of
    a small answer. An encoder keeps no state between calls, so threads may share it."""
    try:
        key = (cls, *sorted(options.items()))
        hash(key)
    except TypeError:  # an unhashable option (a ``default`` closure, say): not worth keeping
        return cls(**options)
    found = _ENCODERS.get(key)
    if found is None:
        found = cls(**options)
        if len(_ENCODERS) < _MAX_ENCODERS:  # a few option sets in practice; never a growing map
            found = _ENCODERS.setdefault(key, found)
    return found


def _is_large(value: Any) -> bool:
    """More than a few thousand values or a few hundred KiB of text (stops as soon as it knows)."""
    nodes = chars = 0
    stack = [value]
    while stack:
        node = stack.pop()
        nodes += 1
        if type(node) is dict:
            stack.extend(node.values())
            chars += sum(len(key) for key in node if type(key) is str)
        elif type(node) is list:
            stack.extend(node)
        elif type(node) is str:
            chars += len(node)
        if nodes > _LARGE_VALUE_NODES or chars > _LARGE_VALUE_CHARS:
            return True
    return False
