"""Data compaction in process: a partition's small data files bin-packed into fewer, with PyArrow,
committed as a ``replace`` snapshot (Java's ``RewriteDataFiles``, bin-pack).

Only what one process handles safely is taken: partitions of the table's current spec with at
least two small data files (under 75% of the target size), no delete file in the partition, at
most ``MAX_PARTITION_BYTES`` of them, and a table with one schema (the files are read back as
written). Everything else is left for Spark's ``rewrite_data_files`` (not started by Growler yet).

The files are read through Growler's object store, concatenated, and written again with
PyIceberg's writer (its statistics, its file names, under the table's location); the current
snapshot's manifests that name a replaced file are rewritten with that entry ``DELETED`` and the
others ``EXISTING``, the new files go in a new manifest as ``ADDED``, and the manifest list becomes
a ``replace`` snapshot on ``main``, committed through the commit loop with ``main`` asserted: a
writer that committed meanwhile wins and the run gives up cleanly, deleting what it wrote.
"""

from __future__ import annotations

import io
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import (
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)

from app.ground.locations import Location, TableFiles
from app.maintenance.compaction import ManifestRewrite
from app.maintenance.files import Reachable
from app.maintenance.options import RewriteSettings

MAX_PARTITION_BYTES = 256 * 1024 * 1024
MIN_FILES = 2


@dataclass
class DataPlan:
    snapshot_id: int
    groups: dict[str, list[Any]] = field(default_factory=dict)  # partition -> data files to rewrite
    skipped: dict[str, str] = field(default_factory=dict)  # partition -> why not in process
    for_spark: dict[str, int] = field(default_factory=dict)  # skipped partition -> its files Spark takes on

    def view(self, on_spark: bool = False) -> dict[str, Any]:
        """The plan as a run records it. On Spark, the skipped partitions are rewritten too (the
        job gets the whole table), so they count among the partitions and files to rewrite."""
        partitions = {key: len(files) for key, files in self.groups.items()}
        if on_spark:
            partitions.update(self.for_spark)
        return {
            "based-on-snapshot-id": self.snapshot_id,
            "partitions": dict(sorted(partitions.items())),
            "files-to-rewrite": sum(partitions.values()),
            ("needs-spark" if on_spark else "skipped"): dict(sorted(self.skipped.items())),
        }


def plan_data(
    metadata: Any, reachable: Reachable, target: int, rewrite: RewriteSettings | None = None
) -> DataPlan | None:
    """Per partition of the current spec, by the policy's thresholds (``RewriteSettings``): at
    least ``min-input-files`` small data files (under ``min-file-size-bytes``, else 75% of the
    target), or at least ``delete-file-threshold`` delete files. One planning pass over the current
    snapshot's manifests; None when no partition needs a rewrite (a table in shape: no job)."""
    rewrite = rewrite or RewriteSettings.of({})
    snapshot = metadata.current_snapshot()
    if snapshot is None or len(metadata.schemas) != 1:
        return None
    spec_id = metadata.default_spec_id
    small_below = rewrite.small_below(target)
    small: dict[str, list[Any]] = {}
    delete_seqs: dict[str, list[int]] = {}
    oldest_data: dict[str, int] = {}  # the partition's lowest data sequence number
    data_files: dict[str, int] = {}  # the partition's live data files
    for manifest in reachable.manifests(snapshot.manifest_list):
        for entry in reachable.entries(manifest, live_only=True):
            data_file = entry.data_file
            key = f"{manifest.partition_spec_id}:{data_file.partition}"
            seq = entry.sequence_number or 0
            if data_file.content != DataFileContent.DATA:
                delete_seqs.setdefault(key, []).append(seq)
                continue
            oldest_data[key] = min(oldest_data.get(key, seq), seq)
            data_files[key] = data_files.get(key, 0) + 1
            if manifest.partition_spec_id == spec_id and data_file.file_size_in_bytes < small_below:
                small.setdefault(key, []).append(data_file)
    plan = DataPlan(snapshot.snapshot_id)
    for key, seqs in delete_seqs.items():
        # a delete file applies only to data files no newer than it: one older than every data file
        # of its partition (left dangling by a rewrite that applied it) needs no rewrite
        live = [seq for seq in seqs if key in oldest_data and oldest_data[key] <= seq]
        if len(live) >= rewrite.delete_file_threshold:
            plan.skipped[key] = "has delete files (needs Spark)"
            plan.for_spark[key] = data_files.get(key, 0)
    for key, files in small.items():
        if key in plan.skipped or len(files) < max(rewrite.min_input_files, MIN_FILES):
            continue
        if rewrite.needs_spark:
            plan.skipped[key] = f"{rewrite.strategy} (needs Spark)"
        elif sum(f.file_size_in_bytes for f in files) > MAX_PARTITION_BYTES:
            plan.skipped[key] = "larger than the in-process bound (needs Spark)"
        else:
            plan.groups[key] = files
            continue
        plan.for_spark[key] = len(files)
    return plan if plan.groups or plan.skipped else None


class DataRewrite:
    """Writes the new data files, manifests and manifest list of one plan: the manifests through a
    ``ManifestRewrite`` (``self.manifests``), whose ``written`` lists every file, data files too,
    and whose ``forget`` deletes them when the run does not commit."""

    def __init__(self, objects: Any, files: TableFiles, metadata: Any, reachable: Reachable) -> None:
        self.manifests = ManifestRewrite(objects, files, metadata)
        self.metadata = metadata
        self.objects = objects
        self.io = self.manifests.io
        self.written = self.manifests.written
        self.reachable = reachable
        # data files go under the table's location (PyIceberg's location provider names them)
        self.data_io = type(self.io)(objects, files, _location(metadata.location), self.io.doing)

    def _own(self, text: str) -> Location:
        return self.reachable.files.require(text, "data file", self.io.doing)

    def write_data(self, plan: DataPlan, after_group: Callable[[list[Any]], None] | None = None) -> dict[str, Any]:
        """Write the plan's groups again (``after_group`` is called after each: a job's progress,
        and its commit point - a cancel or a protection mark stops it there, what it wrote forgotten)."""
        # pyarrow (with numpy) is about 40 MB of every worker's memory: imported only by a data
        # compaction that runs (tests/api/test_worker_imports.py holds a fresh worker to it)
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        metadata = self.metadata
        snapshot_id = secrets.randbits(62) + 1
        sequence_number = metadata.last_sequence_number + 1
        replaced: set[str] = set()
        added: list[Any] = []
        for files in plan.groups.values():
            # the plan's files came from ``Reachable``, which let through only the table's own
            tables = [pq.read_table(io.BytesIO(self.objects.read(self._own(f.file_path)))) for f in files]
            combined = pa.concat_tables(tables, promote_options="default")
            for data_file in _dataframe_to_data_files(metadata, combined, self.data_io):
                self.written.append(_location(data_file.file_path))
                added.append(data_file)
            replaced |= {f.file_path for f in files}
            if after_group is not None:
                after_group(files)
        spec = metadata.spec()
        schema = metadata.schema()
        specs = metadata.specs()
        manifests = []
        current = metadata.current_snapshot()
        for manifest in self.reachable.manifests(current.manifest_list):
            entries = self.reachable.entries(manifest, live_only=True)
            if manifest.content != ManifestContent.DATA or not any(e.data_file.file_path in replaced for e in entries):
                manifests.append(manifest)
                continue
            writer = self.manifests.manifest_writer(specs[manifest.partition_spec_id], schema, snapshot_id)
            for entry in entries:
                (writer.delete if entry.data_file.file_path in replaced else writer.existing)(entry)
            manifests.append(self.manifests.close(writer))
        writer = self.manifests.manifest_writer(spec, schema, snapshot_id)
        for data_file in added:
            writer.add(
                ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=data_file)
            )
        manifests.insert(0, self.manifests.close(writer))
        list_location = self.manifests.location(f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro")
        with write_manifest_list(
            metadata.format_version,
            self.io.new_output(list_location.uri),
            snapshot_id,
            current.snapshot_id,
            sequence_number,
            "gzip",
        ) as list_writer:
            list_writer.add_manifests(manifests)
        self.written.append(list_location)
        summary = {
            "operation": "replace",
            "added-data-files": str(len(added)),
            "deleted-data-files": str(len(replaced)),
            "added-records": str(sum(f.record_count for f in added)),
            "deleted-records": str(sum(f.record_count for files in plan.groups.values() for f in files)),
        }
        return {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": current.snapshot_id,
            "sequence-number": sequence_number,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": list_location.uri,
            "summary": summary,
            "schema-id": metadata.current_schema_id,
        }


def _location(text: str) -> Location:
    """A location Growler writes a new data file to (under the table's location: ``data_io``)."""
    return Location.parse(text, "data file location")
