"""Metadata compaction: the current snapshot's small data manifests rewritten into fewer, committed
as a ``replace`` snapshot (Java's ``RewriteManifests``).

Per partition spec, the data manifests smaller than the target (``config.target_manifest_size_bytes``,
default 8 MiB, Iceberg's ``commit.manifest.target-size-bytes``) are read with PyIceberg and their
live entries written again as ``EXISTING`` (snapshot ids and sequence numbers kept) into new
manifests of about the target size, in the table's metadata directory; delete manifests and large
manifests are carried over as they are. The new manifest list becomes a snapshot with operation
``replace`` on ``main``, committed through ``TableService.commit_table`` with ``main`` asserted at
the snapshot it was built on: a writer that committed meanwhile wins, the run gives up cleanly (the
files it wrote are deleted) and the next run starts again. The rows a reader sees do not change.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import ManifestContent, ManifestFile, write_manifest, write_manifest_list

from app.ground.locations import Location, TableFiles
from app.rules import maintenance as policy_rules
from app.rules.metadata_files import metadata_directory_of
from storage.manifests import WritingObjectStoreFileIO, require_own_entries
from storage.objects import ObjectStore

log = logging.getLogger(__name__)

DEFAULT_TARGET_MANIFEST_BYTES = 8 * 1024 * 1024
MIN_MANIFESTS = 2  # fewer small manifests than this in a spec: nothing to gain


@dataclass
class ManifestPlan:
    snapshot_id: int
    rewrite: list[ManifestFile]
    keep: list[ManifestFile]

    def view(self) -> dict[str, Any]:
        return {
            "based-on-snapshot-id": self.snapshot_id,
            "manifests-to-rewrite": len(self.rewrite),
            "manifests-kept": len(self.keep),
        }


def target_size(policy: policy_rules.EffectivePolicy) -> int:
    config = policy.content.get("config") or {}
    try:
        return max(1024, int(config.get("target_manifest_size_bytes", DEFAULT_TARGET_MANIFEST_BYTES)))
    except (TypeError, ValueError):
        return DEFAULT_TARGET_MANIFEST_BYTES


def plan_manifests(metadata: Any, manifests: list[ManifestFile], target: int) -> ManifestPlan | None:
    """Which of the current snapshot's manifests to rewrite; None when nothing is worth it."""
    snapshot = metadata.current_snapshot()
    if snapshot is None:
        return None
    small: dict[int, list[ManifestFile]] = {}
    keep: list[ManifestFile] = []
    for manifest in manifests:
        if manifest.content == ManifestContent.DATA and manifest.manifest_length < target * 0.75:
            small.setdefault(manifest.partition_spec_id, []).append(manifest)
        else:
            keep.append(manifest)
    rewrite = []
    for group in small.values():
        (rewrite if len(group) >= MIN_MANIFESTS else keep).extend(group)
    if not rewrite:
        return None
    return ManifestPlan(snapshot.snapshot_id, rewrite, keep)


class ManifestRewrite:
    """Writes the new manifests and manifest list of one plan, and the snapshot pointing to them."""

    def __init__(self, objects: ObjectStore, files: TableFiles, metadata: Any) -> None:
        self.metadata = metadata
        directory = Location.parse(metadata_directory_of(metadata.location, metadata.properties))
        self.directory = directory
        self.io = WritingObjectStoreFileIO(objects, files, directory, "Maintenance refused to read the table")
        self.objects = objects
        self.written: list[Location] = []

    def write(self, plan: ManifestPlan, target: int) -> dict[str, Any]:
        """The ``add-snapshot`` update of the new snapshot, its files written (``self.written``)."""
        metadata = self.metadata
        snapshot_id = secrets.randbits(62) + 1
        sequence_number = metadata.last_sequence_number + 1
        specs = metadata.specs()
        schema = metadata.schema()
        new_manifests: list[ManifestFile] = []
        by_spec: dict[int, list[ManifestFile]] = {}
        for manifest in plan.rewrite:
            by_spec.setdefault(manifest.partition_spec_id, []).append(manifest)
        for spec_id, group in sorted(by_spec.items()):
            writer = None
            for manifest in group:
                entries = manifest.fetch_manifest_entry(self.io, discard_deleted=True)
                require_own_entries(self.io, entries)  # else the run fails: its files deleted, no commit
                for entry in entries:
                    if writer is None:
                        writer = self.manifest_writer(specs[spec_id], schema, snapshot_id)
                    writer.existing(entry)
                    if writer.tell() >= target:
                        new_manifests.append(self.close(writer))
                        writer = None
            if writer is not None:
                new_manifests.append(self.close(writer))
        list_location = self.location(f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro")
        with write_manifest_list(
            metadata.format_version,
            self.io.new_output(list_location.uri),
            snapshot_id,
            plan.snapshot_id,
            sequence_number,
            "gzip",
        ) as writer:
            writer.add_manifests([*new_manifests, *plan.keep])
        self.written.append(list_location)
        parent = metadata.snapshot_by_id(plan.snapshot_id)
        summary = {
            "operation": "replace",
            "manifests-created": str(len(new_manifests)),
            "manifests-replaced": str(len(plan.rewrite)),
            "manifests-kept": str(len(plan.keep)),
        }
        for key in ("total-records", "total-data-files", "total-delete-files", "total-files-size"):
            if parent is not None and parent.summary is not None and key in parent.summary.additional_properties:
                summary[key] = parent.summary.additional_properties[key]
        snapshot = {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": plan.snapshot_id,
            "sequence-number": sequence_number,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": list_location.uri,
            "summary": summary,
            "schema-id": metadata.current_schema_id,
        }
        return snapshot

    def manifest_writer(self, spec: Any, schema: Any, snapshot_id: int) -> Any:
        location = self.location(f"{uuid.uuid4()}-m0.avro")
        writer = write_manifest(
            self.metadata.format_version, spec, schema, self.io.new_output(location.uri), snapshot_id, "gzip"
        )
        writer.__enter__()
        self.written.append(location)
        return writer

    @staticmethod
    def close(writer: Any) -> ManifestFile:
        writer.__exit__(None, None, None)
        return writer.to_manifest_file()

    def location(self, name: str) -> Location:
        return self.directory.child(name)

    def forget(self) -> None:
        """The run lost (or failed): delete what it wrote, which nothing points to."""
        if self.written:
            try:
                self.objects.delete(self.written)
            except Exception as exc:  # noqa: BLE001 - orphan removal reclaims what is left
                log.warning("could not delete %d manifests of a lost rewrite: %s", len(self.written), type(exc))


def updates_for(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot["snapshot-id"]},
    ]


def requirements_for(metadata: Any, plan: ManifestPlan) -> list[dict[str, Any]]:
    return [
        {"type": "assert-table-uuid", "uuid": str(metadata.table_uuid)},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": plan.snapshot_id},
    ]
