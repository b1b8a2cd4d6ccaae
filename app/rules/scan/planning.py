"""Server-side scan planning: which files a scan reads, with their deletes and residual filters.

The Iceberg rules are PyIceberg's own, not a re-implementation: the partition filter is its
inclusive projection, manifests are pruned with its manifest evaluator (partition summaries),
entries with its partition expression evaluator and ``_InclusiveMetricsEvaluator`` (column
bounds and counts), position deletes are matched with its ``DeleteFileIndex``, residuals come
from its residual evaluator, and incremental scans follow its ``IncrementalAppendScan`` (append
snapshots between two ids). Only what PyIceberg leaves out is added here: equality deletes
(PyIceberg's planner refuses them) are matched to data files by the spec's rule (an older data
sequence number, the same partition, or any partition for an unpartitioned delete).

``resolve_scan`` checks a request against the table metadata without any I/O (so every 400 is
given before planning starts); ``plan_scan`` reads manifests through a ``ManifestSource``. A
caller's read restrictions are resolved into the scan too (``app/rules/scan/restricted.py``: the
row filter prunes and stays in the residuals, restricted columns decide and answer nothing), so a
plan run later on another thread needs nothing of the request's context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression
from pyiceberg.expressions.visitors import (
    _InclusiveMetricsEvaluator,
    expression_evaluator,
    inclusive_projection,
    manifest_evaluator,
    residual_evaluator_of,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import _min_sequence_number
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot, ancestors_between_ids, is_parent_ancestor_of

from app.ground.errors import BadRequest, InvalidArgument
from app.rules.requests.scans import PlanTableScanRequest
from app.rules.restrictions.policies import Restrictions
from app.rules.scan.files import content_file_json
from app.rules.scan.filter import filter_json, parse_filter
from app.rules.scan.restricted import scan_restriction, without_columns

INITIAL_SEQUENCE_NUMBER = 0
# Iceberg's reserved metadata columns: engines select them (Spark's merge-on-read DELETE reads
# ``_file`` and ``_pos``); they are not in the table schema and do not change the plan.
METADATA_COLUMNS = frozenset(
    {
        "_file",
        "_pos",
        "_deleted",
        "_spec_id",
        "_partition",
        "_row_id",
        "_last_updated_sequence_number",
        "_change_type",
        "_change_ordinal",
        "_commit_snapshot_id",
    }
)


class ManifestSource(Protocol):
    def manifests(self, manifest_list: str) -> Iterable[ManifestFile]: ...
    def entries(self, manifest: ManifestFile) -> list[ManifestEntry]: ...


class PlanningCancelled(Exception):
    """The plan was cancelled while it was being computed."""


@dataclass(frozen=True)
class ResolvedScan:
    """A request checked against the table: the snapshot(s), schema and filter to plan with."""

    metadata: TableMetadata
    schema: Schema
    row_filter: BooleanExpression
    case_sensitive: bool
    snapshot: Snapshot | None = None  # a point-in-time scan (None: the table has no data)
    append_snapshots: tuple[Snapshot, ...] | None = None  # an incremental append scan
    stats_ids: frozenset[int] = field(default_factory=frozenset)
    # read restrictions (none: the defaults): and-ed into every task's residual (the caller's own
    # filter where it names restricted columns, which did not prune), the columns whose partition
    # values are answered null, and the digest of the restrictions the plan was made under
    kept_filter: BooleanExpression = field(default_factory=AlwaysTrue)
    withheld: frozenset[int] = field(default_factory=frozenset)
    reader: str | None = None

    def estimated_files(self) -> int:
        """Data and delete files the plan may touch, from snapshot summaries (no I/O)."""
        if self.append_snapshots is not None:
            return sum(_summary_int(s, "added-data-files") for s in self.append_snapshots)
        if self.snapshot is None:
            return 0
        return _summary_int(self.snapshot, "total-data-files") + _summary_int(self.snapshot, "total-delete-files")


def _summary_int(snapshot: Snapshot, key: str) -> int:
    summary = snapshot.summary
    try:
        return int(summary[key]) if summary is not None and key in summary.additional_properties else 0
    except (TypeError, ValueError):
        return 0


def resolve_scan(
    metadata: TableMetadata, request: PlanTableScanRequest, restrictions: Restrictions | None = None
) -> ResolvedScan:
    """The request checked against the table, and ``restrictions`` (the caller's read
    restrictions, None: none) bound to the scan's schema."""
    case_sensitive = request.case_sensitive
    snapshot_id = request.snapshot_id
    start_id = request.start_snapshot_id
    end_id = request.end_snapshot_id
    if snapshot_id is not None and (start_id is not None or end_id is not None):
        raise InvalidArgument("Cannot plan a scan with both snapshot-id and start-snapshot-id/end-snapshot-id")
    if start_id is not None and end_id is None:
        raise InvalidArgument("end-snapshot-id is required with start-snapshot-id")

    snapshot: Snapshot | None = None
    appends: tuple[Snapshot, ...] | None = None
    schema = metadata.schema()
    if end_id is not None:
        appends = _append_snapshots(metadata, start_id, end_id)
    elif snapshot_id is not None:
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise InvalidArgument(f"Cannot find snapshot with ID {snapshot_id}")
        if request.use_snapshot_schema and snapshot.schema_id is not None:
            schema = metadata.schema_by_id(snapshot.schema_id) or schema
    else:
        snapshot = metadata.current_snapshot()

    row_filter = AlwaysTrue() if request.filter is None else parse_filter(request.filter, schema, case_sensitive)
    select = [name for name in request.select or [] if name.split(".", 1)[0] not in METADATA_COLUMNS]
    if select:
        try:
            schema.select(*select, case_sensitive=case_sensitive)
        except ValueError as exc:
            raise BadRequest(f"Invalid select: {exc}") from exc
    stats_ids = _stats_ids(schema, request.stats_fields, case_sensitive)
    if restrictions is None:
        return ResolvedScan(metadata, schema, row_filter, case_sensitive, snapshot, appends, stats_ids)
    restriction = scan_restriction(restrictions, schema)
    weakened, weaker = without_columns(row_filter, restriction.withheld, schema, case_sensitive)
    return ResolvedScan(
        metadata,
        schema,
        And(restriction.row_filter, weakened),
        case_sensitive,
        snapshot,
        appends,
        stats_ids - restriction.withheld,
        kept_filter=row_filter if weaker else AlwaysTrue(),
        withheld=restriction.withheld,
        reader=restriction.digest,
    )


def _append_snapshots(metadata: TableMetadata, start_id: int | None, end_id: int) -> tuple[Snapshot, ...]:
    """The append snapshots after ``start_id`` (exclusive) up to ``end_id``, as PyIceberg walks them."""
    if metadata.snapshot_by_id(end_id) is None:
        raise InvalidArgument(f"Cannot find end snapshot with ID {end_id}")
    if start_id is not None and not is_parent_ancestor_of(end_id, start_id, metadata):
        raise InvalidArgument(
            f"Starting snapshot (exclusive) {start_id} is not a parent ancestor of end snapshot {end_id}"
        )
    return tuple(
        snapshot
        for snapshot in ancestors_between_ids(
            from_snapshot_id_exclusive=start_id, to_snapshot_id_inclusive=end_id, table_metadata=metadata
        )
        if snapshot.summary is not None and snapshot.summary.operation == Operation.APPEND
    )


def _stats_ids(schema: Schema, names: list[str] | None, case_sensitive: bool) -> frozenset[int]:
    ids: set[int] = set()
    for name in names or []:
        try:
            found = schema.find_field(name, case_sensitive)
        except ValueError as exc:
            raise BadRequest(f"Invalid stats-fields: cannot find field '{name}' in the table schema") from exc
        ids.add(found.field_id)
        ids.update(child.field_id for child in _nested(found.field_type))
    return frozenset(ids)


def _nested(field_type: Any) -> Iterable[Any]:
    for child in getattr(field_type, "fields", ()) or ():
        yield child
        yield from _nested(child.field_type)


# -- planning -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedTask:
    data_file: DataFile
    deletes: tuple[DataFile, ...]
    residual: BooleanExpression


def plan_scan(
    scan: ResolvedScan, source: ManifestSource, should_stop: Callable[[], bool] = lambda: False
) -> list[PlannedTask]:
    """The file scan tasks of a resolved scan, in manifest order."""
    if scan.append_snapshots is not None:
        return _plan_appends(scan, source, should_stop)
    if scan.snapshot is None:
        return []
    return _Planner(scan).plan(list(source.manifests(scan.snapshot.manifest_list)), source, should_stop)


def _plan_appends(scan: ResolvedScan, source: ManifestSource, should_stop: Callable[[], bool]) -> list[PlannedTask]:
    ids = {snapshot.snapshot_id for snapshot in scan.append_snapshots or ()}
    manifests: dict[str, ManifestFile] = {}
    for snapshot in scan.append_snapshots or ():
        for manifest in source.manifests(snapshot.manifest_list):
            if manifest.content == ManifestContent.DATA and manifest.added_snapshot_id in ids:
                manifests.setdefault(manifest.manifest_path, manifest)
    return _Planner(scan).plan(
        list(manifests.values()),
        source,
        should_stop,
        keep=lambda entry: entry.snapshot_id in ids and entry.status == ManifestEntryStatus.ADDED,
    )


class _Planner:
    def __init__(self, scan: ResolvedScan) -> None:
        self.scan = scan
        self.specs = scan.metadata.specs()
        self._projections: dict[int, BooleanExpression] = {}
        self._partition_evaluators: dict[int, Callable[[DataFile], bool]] = {}
        self._residuals: dict[int, Any] = {}
        self.metrics = _InclusiveMetricsEvaluator(scan.schema, scan.row_filter, scan.case_sensitive, False).eval

    def spec(self, spec_id: int) -> PartitionSpec:
        if spec_id not in self.specs:
            raise BadRequest(
                f"Cannot plan the scan: a manifest uses partition spec {spec_id}, not in the table metadata"
            )
        return self.specs[spec_id]

    def projection(self, spec_id: int) -> BooleanExpression:
        if spec_id not in self._projections:
            project = inclusive_projection(self.scan.schema, self.spec(spec_id), self.scan.case_sensitive)
            self._projections[spec_id] = project(self.scan.row_filter)
        return self._projections[spec_id]

    def partition_matches(self, data_file: DataFile) -> bool:
        spec_id = data_file.spec_id or 0
        if spec_id not in self._partition_evaluators:
            partition_type = self.spec(spec_id).partition_type(self.scan.schema)
            evaluate = expression_evaluator(
                Schema(*partition_type.fields), self.projection(spec_id), self.scan.case_sensitive
            )
            self._partition_evaluators[spec_id] = lambda f: evaluate(f.partition)
        return self._partition_evaluators[spec_id](data_file)

    def residual(self, data_file: DataFile) -> BooleanExpression:
        """The filter left for this file once its partition values are known.

        One evaluator per spec: it keeps per-call state, but a plan runs on one thread.
        """
        spec_id = data_file.spec_id or 0
        if spec_id not in self._residuals:
            self._residuals[spec_id] = residual_evaluator_of(
                spec=self.spec(spec_id),
                expr=self.scan.row_filter,
                case_sensitive=self.scan.case_sensitive,
                schema=self.scan.schema,
            )
        return And(self._residuals[spec_id].residual_for(data_file.partition), self.scan.kept_filter)

    def plan(
        self,
        manifests: list[ManifestFile],
        source: ManifestSource,
        should_stop: Callable[[], bool],
        keep: Callable[[ManifestEntry], bool] = lambda _: True,
    ) -> list[PlannedTask]:
        evaluators: dict[int, Callable[[ManifestFile], bool]] = {}
        selected = []
        for manifest in manifests:
            spec_id = manifest.partition_spec_id
            if spec_id not in evaluators:
                evaluators[spec_id] = manifest_evaluator(
                    self.spec(spec_id), self.scan.schema, self.projection(spec_id), self.scan.case_sensitive
                )
            if evaluators[spec_id](manifest):
                selected.append(manifest)
        min_sequence = _min_sequence_number(selected)
        data_entries: list[ManifestEntry] = []
        positions = DeleteFileIndex()
        equalities = _EqualityDeletes()
        for manifest in selected:
            if manifest.content == ManifestContent.DELETES and (manifest.sequence_number or 0) < min_sequence:
                continue  # deletes older than every data file apply to none (PyIceberg's rule)
            if should_stop():
                raise PlanningCancelled()
            for entry in source.entries(manifest):
                data_file = entry.data_file
                if not keep(entry) or not self.partition_matches(data_file) or not self.metrics(data_file):
                    continue
                if data_file.content == DataFileContent.DATA:
                    data_entries.append(entry)
                elif data_file.content == DataFileContent.POSITION_DELETES:
                    positions.add_delete_file(entry, partition_key=data_file.partition)
                else:
                    equalities.add(entry, self.spec(data_file.spec_id or 0))
        tasks = []
        for entry in data_entries:
            data_file = entry.data_file
            sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
            deletes = positions.for_data_file(sequence, data_file, partition_key=data_file.partition)
            found = sorted(deletes, key=lambda f: f.file_path) + equalities.for_data_file(sequence, data_file)
            tasks.append(PlannedTask(data_file, tuple(found), self.residual(data_file)))
        return tasks


class _EqualityDeletes:
    """Equality deletes apply to data files with a smaller data sequence number, in the same
    partition, or in every partition when the delete file's spec is unpartitioned."""

    def __init__(self) -> None:
        self.partitioned: dict[tuple[int, Any], list[tuple[int, DataFile]]] = {}
        self.global_: list[tuple[int, DataFile]] = []

    def add(self, entry: ManifestEntry, spec: PartitionSpec) -> None:
        item = (entry.sequence_number or INITIAL_SEQUENCE_NUMBER, entry.data_file)
        if spec.is_unpartitioned():
            self.global_.append(item)
        else:
            key = (entry.data_file.spec_id or 0, _partition_key(entry.data_file))
            self.partitioned.setdefault(key, []).append(item)

    def for_data_file(self, sequence: int, data_file: DataFile) -> list[DataFile]:
        if not self.partitioned and not self.global_:
            return []
        key = (data_file.spec_id or 0, _partition_key(data_file))
        candidates = self.partitioned.get(key, []) + self.global_
        return sorted((f for seq, f in candidates if seq > sequence), key=lambda f: f.file_path)


def _partition_key(data_file: DataFile) -> tuple[Any, ...]:
    partition = data_file.partition
    return tuple(partition[i] for i in range(len(partition)))


# -- answers ------------------------------------------------------------------------------


def task_pages(scan: ResolvedScan, tasks: list[PlannedTask], page_size: int) -> list[dict[str, Any]]:
    """The tasks as ``ScanTasks`` bodies of at most ``page_size`` file scan tasks each; every
    page lists the delete files its tasks refer to (``delete-file-references`` are positions
    in its own ``delete-files``). An empty plan is one empty page."""
    pages = []
    for start in range(0, max(len(tasks), 1), page_size):
        pages.append(_page(scan, tasks[start : start + page_size]))
    return pages


def _page(scan: ResolvedScan, tasks: list[PlannedTask]) -> dict[str, Any]:
    specs = scan.metadata.specs()
    delete_files: list[dict[str, Any]] = []
    positions: dict[str, int] = {}
    file_tasks = []
    for task in tasks:
        references = []
        for delete in task.deletes:
            if delete.file_path not in positions:
                positions[delete.file_path] = len(delete_files)
                delete_files.append(
                    content_file_json(delete, specs.get(delete.spec_id or 0), scan.schema, withheld=scan.withheld)
                )
            references.append(positions[delete.file_path])
        body: dict[str, Any] = {
            "data-file": content_file_json(
                task.data_file, specs.get(task.data_file.spec_id or 0), scan.schema, scan.stats_ids, scan.withheld
            )
        }
        if references:
            body["delete-file-references"] = references
        body["residual-filter"] = filter_json(task.residual, scan.schema)
        file_tasks.append(body)
    page: dict[str, Any] = {"file-scan-tasks": file_tasks}
    if delete_files:
        page["delete-files"] = delete_files
    return page
