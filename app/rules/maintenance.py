"""Maintenance policies and what they decide (pure: no I/O; ``now_ms`` is always given).

Four policy types, their content compatible with Polaris's published schemas (version
``2025-02-03``: ``enable`` required, ``config`` a map of strings, numbers and booleans; orphan
removal adds ``older_than`` and ``location``, data compaction ``target_file_size_bytes``).
Growler reads these ``config`` keys (Polaris's own examples name the first three):

- snapshot expiry: ``min_snapshot_to_keep``, ``max_snapshot_age_days``, ``max_ref_age_days``;
- orphan file removal: ``min_file_age_days`` (the safety floor, at least 1 day, default 3);
- metadata compaction: ``target_manifest_size_bytes`` (default 8 MiB).

A policy is attached at the catalog, a warehouse, a namespace or a table; per type, the nearest
attachment wins (``effective``). The standard Iceberg table properties
(``history.expire.max-snapshot-age-ms``, ``history.expire.min-snapshots-to-keep``,
``history.expire.max-ref-age-ms``) count as a snapshot-expiry policy attached to the table when
the table sets one explicitly; a policy attached to the table itself still wins over them.
Nothing runs on a table without an enabled policy: Iceberg's built-in defaults never expire
anyone's history by surprise.

``plan_expiry`` is Java's ``ExpireSnapshots`` retention: refs older than their maximum age go
(never ``main``); each branch keeps its ancestors while fewer than its minimum are kept or they
are younger than its maximum age; a tag keeps its snapshot; snapshots no ref reaches are kept
while younger than the maximum age.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SNAPSHOT_EXPIRY = "system.snapshot-expiry"
ORPHAN_FILE_REMOVAL = "system.orphan-file-removal"
METADATA_COMPACTION = "system.metadata-compaction"
DATA_COMPACTION = "system.data-compaction"
POLICY_TYPES = (SNAPSHOT_EXPIRY, ORPHAN_FILE_REMOVAL, METADATA_COMPACTION, DATA_COMPACTION)
# What the executor runs (data compaction: in process only; what needs Spark is skipped and said so).
EXECUTABLE = (SNAPSHOT_EXPIRY, ORPHAN_FILE_REMOVAL, METADATA_COMPACTION, DATA_COMPACTION)
SCHEMA_VERSION = "2025-02-03"

DAY_MS = 86_400_000
# Iceberg's defaults, used only once a policy (or a table property) enabled expiry.
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * DAY_MS
DEFAULT_MIN_SNAPSHOTS = 1
# Orphans: nothing younger than this is deleted (a writer's files exist before its commit).
DEFAULT_ORPHAN_FLOOR_MS = 3 * DAY_MS
MIN_ORPHAN_FLOOR_MS = 1 * DAY_MS
# Files smaller than this share of the target size count as small (Iceberg's min-file-size-bytes).
SMALL_FILE_SHARE = 0.75
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
MAX_CONFIG_KEYS = 50
MAX_DAYS = 100 * 365

PROPERTY_MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"
PROPERTY_MIN_SNAPSHOTS = "history.expire.min-snapshots-to-keep"
PROPERTY_MAX_REF_AGE = "history.expire.max-ref-age-ms"
EXPIRY_PROPERTIES = (PROPERTY_MAX_SNAPSHOT_AGE, PROPERTY_MIN_SNAPSHOTS, PROPERTY_MAX_REF_AGE)

# Attachment levels, farthest first: the nearest (highest index) wins.
LEVELS = ("catalog", "warehouse", "namespace", "table")
TABLE_PROPERTIES = "table-properties"

MAIN = "main"


class InvalidPolicy(ValueError):
    """A policy's content breaks its schema; the message says how (a 400 at the edge)."""


@dataclass(frozen=True)
class Attachment:
    """A policy as stored: where it is attached (level, and the namespace depth for namespaces)."""

    policy_type: str
    level: str
    depth: int
    content: dict[str, Any]


@dataclass(frozen=True)
class EffectivePolicy:
    policy_type: str
    content: dict[str, Any]
    inherited_from: str  # catalog, warehouse, namespace, table or table-properties

    @property
    def enabled(self) -> bool:
        return bool(self.content.get("enable"))


def validate(policy_type: str, content: Any) -> dict[str, Any]:
    """The content, checked against its type's schema (Polaris's, plus Growler's bounds)."""
    if policy_type not in POLICY_TYPES:
        raise InvalidPolicy(f"Unknown policy type {policy_type!r}: one of {', '.join(POLICY_TYPES)}")
    if not isinstance(content, dict):
        raise InvalidPolicy("A policy's content is a JSON object")
    allowed = {"version", "enable", "config"}
    if policy_type == ORPHAN_FILE_REMOVAL:
        allowed |= {"older_than", "location"}
    if policy_type == DATA_COMPACTION:
        allowed |= {"target_file_size_bytes"}
    unknown = sorted(set(content) - allowed)
    if unknown:
        raise InvalidPolicy(f"Unknown fields for {policy_type}: {', '.join(unknown)}")
    if not isinstance(content.get("enable"), bool):
        raise InvalidPolicy("enable (true or false) is required")
    if "version" in content and content["version"] != SCHEMA_VERSION:
        raise InvalidPolicy(f"version must be {SCHEMA_VERSION}")
    config = content.get("config", {})
    if not isinstance(config, dict) or len(config) > MAX_CONFIG_KEYS:
        raise InvalidPolicy(f"config is an object of at most {MAX_CONFIG_KEYS} keys")
    for key, value in config.items():
        if len(key) > 200 or not isinstance(value, str | int | float | bool) or len(str(value)) > 1000:
            raise InvalidPolicy("config values are strings, numbers or booleans")
    if policy_type == SNAPSHOT_EXPIRY:
        _whole(config, "min_snapshot_to_keep", 1, 1_000_000)
        _whole(config, "max_snapshot_age_days", 0, MAX_DAYS)
        _whole(config, "max_ref_age_days", 1, MAX_DAYS)
    if policy_type == ORPHAN_FILE_REMOVAL:
        _whole(config, "min_file_age_days", MIN_ORPHAN_FLOOR_MS // DAY_MS, MAX_DAYS)
        older_than = content.get("older_than")
        if older_than is not None and (isinstance(older_than, bool) or not isinstance(older_than, int | float)):
            raise InvalidPolicy("older_than is a Unix timestamp in seconds")
        if "location" in content and not isinstance(content["location"], str):
            raise InvalidPolicy("location is a string")
    if policy_type == METADATA_COMPACTION:
        _whole(config, "target_manifest_size_bytes", 1024, 2**31)
    if policy_type == DATA_COMPACTION and "target_file_size_bytes" in content:
        size = content["target_file_size_bytes"]
        if isinstance(size, bool) or not isinstance(size, int | float) or not 1024 <= size <= 2**40:
            raise InvalidPolicy("target_file_size_bytes is a number between 1 KiB and 1 TiB")
    return content


def _whole(config: dict[str, Any], key: str, low: int, high: int) -> None:
    if key not in config:
        return
    value = config[key]
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidPolicy(f"config.{key} is a whole number between {low} and {high}")


def _number(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    if value is None:
        return None
    return int(str(value).strip())


def effective(attachments: list[Attachment], properties: dict[str, str]) -> dict[str, EffectivePolicy]:
    """Per type, the nearest attachment (table, deepest namespace, warehouse, catalog); table
    properties that set expiry explicitly stand between the table's own attachment and the rest."""
    found: dict[str, tuple[tuple[int, int], EffectivePolicy]] = {}
    for attachment in attachments:
        rank = (LEVELS.index(attachment.level) * 2, attachment.depth)
        if attachment.level == "table":
            rank = (LEVELS.index("table") * 2 + 1, 0)  # above the properties
        current = found.get(attachment.policy_type)
        if current is None or rank > current[0]:
            policy = EffectivePolicy(attachment.policy_type, attachment.content, attachment.level)
            found[attachment.policy_type] = (rank, policy)
    from_properties = expiry_from_properties(properties)
    if from_properties is not None:
        current = found.get(SNAPSHOT_EXPIRY)
        if current is None or current[0] < (LEVELS.index("table") * 2, 0):
            found[SNAPSHOT_EXPIRY] = ((LEVELS.index("table") * 2, 0), from_properties)
    return {policy_type: policy for policy_type, (_, policy) in found.items()}


def sets_expiry(properties: Mapping[str, str]) -> bool:
    """Whether the table's properties set ``history.expire.*`` (its own snapshot-expiry policy)."""
    return any(key in properties for key in EXPIRY_PROPERTIES)


def expiry_from_properties(properties: dict[str, str]) -> EffectivePolicy | None:
    """The table's explicit ``history.expire.*`` properties as a snapshot-expiry policy."""
    if not sets_expiry(properties):
        return None
    config: dict[str, Any] = {}
    for key, name in (
        (PROPERTY_MAX_SNAPSHOT_AGE, "max_snapshot_age_ms"),
        (PROPERTY_MIN_SNAPSHOTS, "min_snapshot_to_keep"),
        (PROPERTY_MAX_REF_AGE, "max_ref_age_ms"),
    ):
        if key in properties:
            try:
                config[name] = max(0, int(properties[key]))
            except ValueError:
                continue
    return EffectivePolicy(SNAPSHOT_EXPIRY, {"enable": True, "config": config}, TABLE_PROPERTIES)


@dataclass(frozen=True)
class ExpirySettings:
    max_snapshot_age_ms: int
    min_snapshots: int
    max_ref_age_ms: int | None

    @classmethod
    def of(cls, policy: EffectivePolicy) -> ExpirySettings:
        config = policy.content.get("config") or {}
        age = config.get("max_snapshot_age_ms")
        if age is None:
            days = _number(config, "max_snapshot_age_days")
            age = DEFAULT_MAX_SNAPSHOT_AGE_MS if days is None else days * DAY_MS
        ref_age = config.get("max_ref_age_ms")
        if ref_age is None:
            days = _number(config, "max_ref_age_days")
            ref_age = None if days is None else days * DAY_MS
        keep = config.get("min_snapshot_to_keep")
        return cls(int(age), max(1, int(keep) if keep is not None else DEFAULT_MIN_SNAPSHOTS), ref_age)

    def view(self) -> dict[str, Any]:
        return {
            "max-snapshot-age-ms": self.max_snapshot_age_ms,
            "min-snapshots-to-keep": self.min_snapshots,
            "max-ref-age-ms": self.max_ref_age_ms,
        }


@dataclass(frozen=True)
class ExpiryPlan:
    """What an expiry removes from one version of the metadata, and the refs it relied on."""

    snapshot_ids: tuple[int, ...]
    refs_removed: tuple[str, ...]
    refs: dict[str, int] = field(default_factory=dict)  # every ref planned from: asserted at commit
    retained: int = 0

    @property
    def empty(self) -> bool:
        return not self.snapshot_ids and not self.refs_removed

    def updates(self) -> list[dict[str, Any]]:
        updates: list[dict[str, Any]] = [{"action": "remove-snapshot-ref", "ref-name": n} for n in self.refs_removed]
        if self.snapshot_ids:
            updates.append({"action": "remove-snapshots", "snapshot-ids": list(self.snapshot_ids)})
        return updates

    def requirements(self, table_uuid: str) -> list[dict[str, Any]]:
        """Every ref as planned: a writer that moved, made or dropped one wins, and the run re-plans."""
        requirements: list[dict[str, Any]] = [{"type": "assert-table-uuid", "uuid": table_uuid}]
        for name, snapshot_id in sorted(self.refs.items()):
            requirements.append({"type": "assert-ref-snapshot-id", "ref": name, "snapshot-id": snapshot_id})
        return requirements

    def view(self) -> dict[str, Any]:
        return {
            "expired-snapshot-ids": list(self.snapshot_ids),
            "removed-refs": list(self.refs_removed),
            "retained-snapshots": self.retained,
        }


def plan_expiry(metadata: Any, settings: ExpirySettings, now_ms: int) -> ExpiryPlan:
    """The snapshots and refs Java's ExpireSnapshots would remove from ``metadata`` at ``now_ms``."""
    snapshots = {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}
    removed_refs: list[str] = []
    kept_refs: dict[str, int] = {}
    retained: set[int] = set()
    for name, ref in sorted(metadata.refs.items()):
        head = snapshots.get(ref.snapshot_id)
        max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else settings.max_ref_age_ms
        if name != MAIN and head is not None and max_ref_age is not None and now_ms - head.timestamp_ms > max_ref_age:
            removed_refs.append(name)
            continue
        kept_refs[name] = ref.snapshot_id
        if head is None:
            continue
        if str(ref.snapshot_ref_type) == "tag" or getattr(ref.snapshot_ref_type, "value", "") == "tag":
            retained.add(head.snapshot_id)
            continue
        keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else settings.min_snapshots
        age = ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else settings.max_snapshot_age_ms
        retained |= _branch_retained(snapshots, head.snapshot_id, max(1, keep), now_ms - age)
    reached = _reachable(snapshots, [snapshots[i].snapshot_id for i in kept_refs.values() if i in snapshots])
    older_than = now_ms - settings.max_snapshot_age_ms
    for snapshot in snapshots.values():  # not on any ref: kept while young (Java's expireOlderThan)
        if snapshot.snapshot_id not in reached and snapshot.timestamp_ms >= older_than:
            retained.add(snapshot.snapshot_id)
    expired = tuple(sorted(i for i in snapshots if i not in retained))
    every_ref = {name: ref.snapshot_id for name, ref in metadata.refs.items()}
    return ExpiryPlan(expired, tuple(removed_refs), every_ref, len(retained))


def _branch_retained(snapshots: dict[int, Any], head: int, keep: int, older_than_ms: int) -> set[int]:
    retained: set[int] = set()
    current = snapshots.get(head)
    while current is not None and current.snapshot_id not in retained:
        if len(retained) >= keep and current.timestamp_ms < older_than_ms:
            break
        retained.add(current.snapshot_id)
        parent = current.parent_snapshot_id
        current = snapshots.get(parent) if parent is not None else None
    return retained


def _reachable(snapshots: dict[int, Any], heads: list[int]) -> set[int]:
    reached: set[int] = set()
    for head in heads:
        current = snapshots.get(head)
        while current is not None and current.snapshot_id not in reached:
            reached.add(current.snapshot_id)
            parent = current.parent_snapshot_id
            current = snapshots.get(parent) if parent is not None else None
    return reached


def orphan_cutoff_ms(policy: EffectivePolicy, now_ms: int) -> int:
    """Files last modified before this instant may be orphans; younger ones are never touched.

    The floor is the policy's ``config.min_file_age_days`` (at least 1 day, default 3); a Polaris
    ``older_than`` can only move the cutoff further back, never past the floor.
    """
    config = policy.content.get("config") or {}
    days = _number(config, "min_file_age_days")
    floor_ms = DEFAULT_ORPHAN_FLOOR_MS if days is None else max(MIN_ORPHAN_FLOOR_MS, days * DAY_MS)
    cutoff = now_ms - floor_ms
    older_than = policy.content.get("older_than")
    if older_than is not None:
        cutoff = min(cutoff, int(float(older_than) * 1000))
    return cutoff


def target_file_size(policy: EffectivePolicy | None, properties: dict[str, str]) -> int:
    if policy is not None and policy.content.get("target_file_size_bytes"):
        return int(policy.content["target_file_size_bytes"])
    try:
        return int(properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))
    except ValueError:
        return DEFAULT_TARGET_FILE_SIZE


@dataclass(frozen=True)
class TableShape:
    """What the health report measured on a table's current state."""

    snapshots: int
    expirable_snapshots: int
    manifests: int
    small_manifests: int
    data_files: int
    small_data_files: int
    delete_files: int


def recommendations(shape: TableShape, policies: dict[str, EffectivePolicy]) -> dict[str, str]:
    """Per policy type, one line saying whether it is worth running and why."""
    advice = {}
    expiry = policies.get(SNAPSHOT_EXPIRY)
    if shape.expirable_snapshots:
        advice[SNAPSHOT_EXPIRY] = f"run: {shape.expirable_snapshots} snapshots are past the policy's retention"
    elif expiry is None or not expiry.enabled:
        many = shape.snapshots > 100
        advice[SNAPSHOT_EXPIRY] = (
            f"attach a policy: {shape.snapshots} snapshots and nothing expires them" if many else "nothing to do"
        )
    else:
        advice[SNAPSHOT_EXPIRY] = "nothing to do: every snapshot is within the policy's retention"
    orphans = policies.get(ORPHAN_FILE_REMOVAL)
    advice[ORPHAN_FILE_REMOVAL] = (
        "scheduled" if orphans is not None and orphans.enabled else "attach a policy to reclaim files of failed writes"
    )
    advice[METADATA_COMPACTION] = (
        f"run: {shape.small_manifests} of {shape.manifests} manifests are small"
        if shape.manifests > 10 and shape.small_manifests * 2 > shape.manifests
        else "nothing to do"
    )
    small_share = shape.small_data_files / shape.data_files if shape.data_files else 0.0
    advice[DATA_COMPACTION] = (
        f"run: {shape.small_data_files} of {shape.data_files} data files are small"
        if shape.small_data_files > 10 and small_share > 0.5
        else "nothing to do"
    )
    return advice


# After commits (issue 37): a table is due for maintenance once this many commits landed on it
# through one worker, or once its history reached this many snapshots - and at most once every
# COMMIT_TRIGGER_EVERY_S per table and worker, so a table whose policy keeps a long history is
# not looked at after every commit.
COMMITS_BEFORE_DUE = 100
SNAPSHOTS_BEFORE_DUE = 500
COMMIT_TRIGGER_EVERY_S = 30.0


def past_commit_threshold(commits: int, snapshots: int) -> bool:
    """Whether the commits counted since a table was last made due call for a look at it."""
    return commits >= COMMITS_BEFORE_DUE or snapshots >= SNAPSHOTS_BEFORE_DUE
