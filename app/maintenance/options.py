"""What a data-compaction policy says about how to rewrite (issue 49): thresholds, strategy, and
the Spark job's resources. Pure: no I/O; read by the planner (app/maintenance/data.py), the Spark
job's command (app/maintenance/spark.py), and checked when a policy is attached.

The policy's ``config`` takes Iceberg's own ``rewrite_data_files`` option names, so an operator who
knows Iceberg reads them as they are:

- ``min-input-files`` (default 2): a partition is rewritten when at least this many of its data
  files are small;
- ``min-file-size-bytes`` (default 75% of the target): what "small" means;
- ``delete-file-threshold`` (default 1): a partition with at least this many delete files is
  rewritten whatever its file count (its deletes applied);
- ``partial-progress.enabled`` (default false: one commit, all or nothing) and
  ``partial-progress.max-commits``;
- ``max-concurrent-file-group-rewrites`` (default 5, Iceberg's);
- ``strategy``: ``binpack`` (default), ``sort`` (with ``sort-order``, Iceberg's syntax:
  ``"id DESC NULLS LAST, name"``; the table's sort order without it) or ``z-order`` (with
  ``z-order-columns``: ``"a,b"``). Sort and z-order run on Spark only.

And the Spark job's resources: ``spark.executor-instances`` (default 2), ``spark.executor-memory``
(default ``1g``), ``spark.executor-cores`` (default 1), ``spark.shuffle-partitions`` (default 32).
The operator's ``GROWLER_SPARK_CONF`` wins over the defaults, a policy over both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

STRATEGIES = ("binpack", "sort", "z-order")
DEFAULT_MIN_INPUT_FILES = 2
SMALL_SHARE = 0.75
DEFAULT_RESOURCES = {
    "spark.executor.instances": "2",
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.sql.shuffle.partitions": "32",
}
_MEMORY = re.compile(r"^[1-9][0-9]{0,5}[kmgt]$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,199}$")
_SORT_TERM = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,199}( (ASC|DESC))?( NULLS (FIRST|LAST))?$", re.IGNORECASE)


class InvalidRewrite(ValueError):
    """A data-compaction policy's config that cannot be run; its message says which key."""


def _whole(config: dict[str, Any], key: str, default: int | None, low: int, high: int) -> int | None:
    value = config.get(key, default)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRewrite(f"config.{key} must be a whole number between {low} and {high}")
    return value


def _flag(config: dict[str, Any], key: str) -> bool:
    value = config.get(key, False)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise InvalidRewrite(f"config.{key} must be true or false")
    return value


@dataclass(frozen=True)
class RewriteSettings:
    min_input_files: int
    min_file_size_bytes: int | None  # None: 75% of the target
    delete_file_threshold: int
    partial_progress: bool
    max_commits: int | None
    max_concurrent_groups: int | None
    strategy: str
    sort_order: str | None  # Iceberg's sort_order argument (z-order as zorder(a,b))
    resources_set: tuple[tuple[str, str], ...]  # the Spark conf the policy sets itself

    @classmethod
    def of(cls, config: dict[str, Any]) -> RewriteSettings:
        """The policy's config read and checked (InvalidRewrite names the first bad key)."""
        strategy = str(config.get("strategy", "binpack")).lower()
        if strategy not in STRATEGIES:
            raise InvalidRewrite(f"config.strategy must be one of {', '.join(STRATEGIES)}")
        sort_order = None
        if strategy == "sort" and config.get("sort-order"):
            terms = [term.strip() for term in str(config["sort-order"]).split(",")]
            if not terms or len(terms) > 20 or not all(_SORT_TERM.match(term) for term in terms):
                raise InvalidRewrite("config.sort-order is column [ASC|DESC] [NULLS FIRST|LAST], comma-separated")
            sort_order = ", ".join(terms)
        if strategy == "z-order":
            columns = [column.strip() for column in str(config.get("z-order-columns", "")).split(",") if column.strip()]
            if not columns or len(columns) > 20 or not all(_COLUMN.match(column) for column in columns):
                raise InvalidRewrite("config.z-order-columns names the columns to z-order, comma-separated")
            sort_order = f"zorder({','.join(columns)})"
        resources: list[tuple[str, str]] = []
        if "spark.executor-memory" in config:
            memory = str(config["spark.executor-memory"]).lower()
            if not _MEMORY.match(memory):
                raise InvalidRewrite("config.spark.executor-memory is a size such as 512m or 4g")
            resources.append(("spark.executor.memory", memory))
        for key, conf, high in (
            ("spark.executor-instances", "spark.executor.instances", 1000),
            ("spark.executor-cores", "spark.executor.cores", 256),
            ("spark.shuffle-partitions", "spark.sql.shuffle.partitions", 100_000),
        ):
            value = _whole(config, key, None, 1, high)
            if value is not None:
                resources.append((conf, str(value)))
        return cls(
            min_input_files=_whole(config, "min-input-files", DEFAULT_MIN_INPUT_FILES, 1, 100_000) or 1,
            min_file_size_bytes=_whole(config, "min-file-size-bytes", None, 0, 2**40),
            delete_file_threshold=_whole(config, "delete-file-threshold", 1, 1, 100_000) or 1,
            partial_progress=_flag(config, "partial-progress.enabled"),
            max_commits=_whole(config, "partial-progress.max-commits", None, 1, 1000),
            max_concurrent_groups=_whole(config, "max-concurrent-file-group-rewrites", None, 1, 1000),
            strategy=strategy,
            sort_order=sort_order,
            resources_set=tuple(resources),
        )

    def small_below(self, target: int) -> float:
        """The size under which a data file is small."""
        return float(self.min_file_size_bytes) if self.min_file_size_bytes is not None else target * SMALL_SHARE

    @property
    def needs_spark(self) -> bool:
        """Sort and z-order rewrite on Spark only (the in-process path bin-packs)."""
        return self.strategy != "binpack"

    def options(self) -> dict[str, str]:
        """Iceberg's rewrite_data_files options."""
        options = {
            "min-input-files": str(self.min_input_files),
            "delete-file-threshold": str(self.delete_file_threshold),
            "partial-progress.enabled": str(self.partial_progress).lower(),
            # the delete files a rewrite applied go with it: left dangling, they would make the
            # table look as if it still needed one (Iceberg 1.7+)
            "remove-dangling-deletes": "true",
        }
        if self.min_file_size_bytes is not None:
            options["min-file-size-bytes"] = str(self.min_file_size_bytes)
        if self.max_commits is not None:
            options["partial-progress.max-commits"] = str(self.max_commits)
        if self.max_concurrent_groups is not None:
            options["max-concurrent-file-group-rewrites"] = str(self.max_concurrent_groups)
        return options

    def procedure_args(self) -> dict[str, str]:
        """rewrite_data_files' strategy and sort_order arguments (binpack: none)."""
        if self.strategy == "binpack":
            return {}
        args = {"strategy": "sort"}
        if self.sort_order is not None:
            args["sort_order"] = self.sort_order
        return args

    def resources(self, explicit: dict[str, str] | None = None, standalone: bool = False) -> dict[str, str]:
        """The job's --conf for resources: the defaults, then what the operator's conf set
        (``explicit``), then what the policy set. On a standalone master the executors come from
        spark.cores.max (spark.executor.instances is YARN's and Kubernetes's)."""
        chosen = {**DEFAULT_RESOURCES, **(explicit or {}), **dict(self.resources_set)}
        if standalone:
            cores = int(chosen["spark.executor.instances"]) * int(chosen["spark.executor.cores"])
            chosen.setdefault("spark.cores.max", str(cores))
        return chosen
