"""Table metadata in and out of JSON: parsing a stored or registered document, and writing the
canonical metadata-file text (spec field names, Java's key order, snapshots serialised once)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import UnknownTransform
from pyiceberg.typedef import IcebergBaseModel

from app.ground.errors import BadRequest, InvalidArgument, invalid_metadata
from app.ground.lru import LruCache
from app.rules.describe import describe_error
from app.rules.table.models import FORMAT_VERSIONS, INVALID, METADATA_ADAPTER, Lossless, _Snapshot, starts_with_same

# The metadata-file key order of Java's TableMetadataParser, so our files read like everyone else's.
_KEY_ORDER = (
    "format-version",
    "table-uuid",
    "location",
    "last-sequence-number",
    "last-updated-ms",
    "next-row-id",
    "last-column-id",
    "schema",
    "current-schema-id",
    "schemas",
    "partition-spec",
    "default-spec-id",
    "partition-specs",
    "last-partition-id",
    "default-sort-order-id",
    "sort-orders",
    "properties",
    "current-snapshot-id",
    "refs",
    "snapshots",
    "statistics",
    "partition-statistics",
    "snapshot-log",
    "metadata-log",
    "encryption-keys",
)


def parse_metadata(
    text: str | bytes,
    screen: Callable[[dict[str, Any]], None] | None = None,
    snapshot_json: SnapshotJson | None = None,
) -> TableMetadata:
    """Parse a metadata file (registerTable, stored documents); BadRequest when it is not valid.

    ``screen`` sees the decoded document before the model is built from it, and may refuse it
    (a commit's requirements: ``updates.screen_for``). With ``snapshot_json``, snapshots it
    serialised before are taken as they are (``SnapshotJson.reuse``) instead of built again.
    """
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"not valid table metadata: {exc}") from exc
    if isinstance(data, dict):
        if screen is not None:
            screen(data)
        if snapshot_json is not None:
            snapshot_json.reuse(data)
    return metadata_from_dict(data, "not valid table metadata")


def metadata_from_dict(data: object, problem: str) -> TableMetadata:
    if not isinstance(data, dict):
        raise BadRequest(f"{problem}: expected a JSON object")
    if data.get("format-version") not in FORMAT_VERSIONS:
        raise InvalidArgument(f"{problem}: unsupported format-version {data.get('format-version')!r}")
    try:
        metadata = METADATA_ADAPTER.validate_python(data)
    except INVALID as exc:
        raise invalid_metadata(f"{problem}: {describe_error(exc)}", exc) from exc
    check_refs(metadata, problem)
    return metadata


def check_refs(metadata: TableMetadata, problem: str) -> None:
    """Java's ``validateRefs``: refs point at known snapshots and ``main`` is the current one."""
    for name, ref in metadata.refs.items():
        if metadata.snapshot_by_id(ref.snapshot_id) is None:
            raise InvalidArgument(f"{problem}: ref {name} points to unknown snapshot {ref.snapshot_id}")
    main = metadata.refs.get(MAIN_BRANCH)
    if (main.snapshot_id if main else None) != metadata.current_snapshot_id:
        raise InvalidArgument(f"{problem}: current-snapshot-id {metadata.current_snapshot_id} does not match main")


_COMPACT = (",", ":")


class SnapshotJson:
    """The JSON of snapshots already serialised, reused when the next version is written.

    Snapshots never change once added, and a commit's new metadata shares its base's snapshot
    objects (updates copy only what they change). Two levels keep a commit's cost from growing
    with the table's history:

    - per table, the ``snapshots`` array last written: an append commit's list starts with the
      very objects of its base's list, so its array is the base's text plus the new snapshots;
    - per snapshot, its text, for lists that are not such an extension (snapshots expired, the
      first commit after a parse).

    An entry is used only for the very objects it was made from (models are frozen), so it can
    never be stale; a miss costs serialising again, never a wrong text.
    """

    def __init__(self, capacity: int = 1024, tables: int = 64) -> None:
        self._texts: LruCache[tuple[int, int], tuple[Snapshot, str]] = LruCache(capacity)
        self._arrays: LruCache[tuple[str, int], tuple[tuple[Snapshot, ...], str]] = LruCache(tables)

    def of(self, snapshot: Snapshot, format_version: int) -> str:
        key = (snapshot.snapshot_id, format_version)
        cached = self._texts.get(key)
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        text = json.dumps(_snapshot_dict(snapshot, format_version), separators=_COMPACT)
        self._texts.put(key, (snapshot, text))
        return text

    def reuse(self, data: dict[str, Any]) -> None:
        """Put in a decoded document's ``snapshots``, for each element that is exactly the text this
        cache holds for a parsed snapshot of that id, that very snapshot object.

        A worker that parses the version another worker wrote (W7: half the commits) would otherwise
        build every snapshot again and, the objects being new, serialise them all again too. The
        text is the object's own serialisation, so the model built from it would equal the object;
        anything else (another writer's formatting, a changed snapshot) is built as usual.
        """
        snapshots, version = data.get("snapshots"), data.get("format-version")
        if not isinstance(snapshots, list) or version not in (2, 3):
            return  # v1 text leaves out a snapshot's sequence number: it would not tell the object
        for position, element in enumerate(snapshots):
            snapshot_id = element.get("snapshot-id") if isinstance(element, dict) else None
            cached = self._texts.get((snapshot_id, version)) if isinstance(snapshot_id, int) else None
            if (
                cached is not None
                and isinstance(cached[0], _Snapshot)
                and json.dumps(element, separators=_COMPACT) == cached[1]
            ):
                snapshots[position] = cached[0]

    def array(self, metadata: TableMetadata) -> str:
        """The elements of ``metadata``'s ``snapshots`` array, comma-separated."""
        version = metadata.format_version
        snapshots = tuple(metadata.snapshots)
        key = (str(metadata.table_uuid), version)
        known = self._arrays.get(key)
        if known is not None and starts_with_same(snapshots, known[0]):
            added = [self.of(snapshot, version) for snapshot in snapshots[len(known[0]) :]]
            text = ",".join([known[1], *added]) if known[0] else ",".join(added)
        else:
            text = ",".join([self.of(snapshot, version) for snapshot in snapshots])
        self._arrays.put(key, (snapshots, text))
        return text


def _snapshot_dict(snapshot: Snapshot, format_version: int) -> dict[str, Any]:
    """One element of ``snapshots`` as ``Lossless.serialize_snapshots`` writes it."""
    if format_version == 1:
        snapshot = snapshot.model_copy(update={"sequence_number": None})
    return snapshot.model_dump(mode="json")


def to_json(metadata: TableMetadata, snapshot_json: SnapshotJson | None = None) -> str:
    """The canonical metadata-file JSON: spec field names, Java's key order, no nulls.

    With ``snapshot_json``, snapshots it has already serialised are not serialised again; the
    text is the same either way.
    """
    if snapshot_json is None or not metadata.snapshots:
        return json.dumps(to_dict(metadata), separators=_COMPACT)
    data = to_dict(metadata, snapshots=False)
    keys = list(data)
    at = keys.index("snapshots")
    head = json.dumps({key: data[key] for key in keys[:at]}, separators=_COMPACT)
    tail = json.dumps({key: data[key] for key in keys[at + 1 :]}, separators=_COMPACT)
    head, tail = head[1:-1], tail[1:-1]
    # one join: the snapshots' text is most of the document, and each copy of it showed in a profile
    return "".join(
        (
            "{",
            head,
            "," if head else "",
            '"snapshots":[',
            snapshot_json.array(metadata),
            "]",
            "," if tail else "",
            tail,
            "}",
        )
    )


def to_dict(metadata: TableMetadata, snapshots: bool = True) -> dict[str, Any]:
    """The document as a dict; ``snapshots=False`` leaves a placeholder where they go."""
    metadata = as_lossless(metadata)
    data = metadata.model_dump(mode="json", exclude=None if snapshots else {"snapshots"})
    if not snapshots:
        data["snapshots"] = None
    _restore_unknown_transforms(data, metadata)
    if metadata.format_version == 1:
        # v1 readers use the single current schema/spec; they are derived, never stale.
        data["schema"] = next(s for s in data["schemas"] if s["schema-id"] == data["current-schema-id"])
        data["partition-spec"] = next(s for s in data["partition-specs"] if s["spec-id"] == data["default-spec-id"])[
            "fields"
        ]
    if not data.get("encryption-keys"):
        data.pop("encryption-keys", None)
    ordered = {key: data[key] for key in _KEY_ORDER if key in data}
    ordered.update((key, value) for key, value in data.items() if key not in ordered)
    return ordered


def _restore_unknown_transforms(data: dict[str, Any], metadata: TableMetadata) -> None:
    """PyIceberg serialises a transform it does not know as "unknown"; write back its real name.

    Such transforms can only come from stored metadata (new specs must bind), e.g. a newer writer's.
    """
    pairs = [
        *zip(data["partition-specs"], metadata.partition_specs, strict=True),
        *zip(data["sort-orders"], metadata.sort_orders, strict=True),
    ]
    for document, model in pairs:
        for field_json, field_model in zip(document["fields"], model.fields, strict=True):
            if isinstance(field_model.transform, UnknownTransform):
                field_json["transform"] = field_model.transform._transform


def as_lossless(metadata: TableMetadata) -> TableMetadata:
    """Accept plain PyIceberg metadata too (e.g. built by a caller), as our widened model."""
    if isinstance(metadata, Lossless):
        return metadata
    data = IcebergBaseModel.model_dump(metadata, mode="json")
    return metadata_from_dict(data, "invalid table metadata")


def refs_only(metadata_json: dict[str, Any]) -> dict[str, Any]:
    """``loadTable?snapshots=refs``: only the snapshots a branch or tag points to; all else as is."""
    refs = metadata_json.get("refs") or {}
    wanted = {ref.get("snapshot-id") for ref in refs.values() if isinstance(ref, dict)}
    current = metadata_json.get("current-snapshot-id")
    if current is not None and current != -1:
        wanted.add(current)  # v1 metadata may have a current snapshot and no refs
    if "snapshots" not in metadata_json:
        return dict(metadata_json)
    snapshots = [s for s in metadata_json["snapshots"] or [] if s.get("snapshot-id") in wanted]
    return {**metadata_json, "snapshots": snapshots}


def table_uuid(metadata: TableMetadata) -> str:
    return str(metadata.table_uuid)


def current_location(metadata: TableMetadata) -> str:
    """The table's base location."""
    return metadata.location
