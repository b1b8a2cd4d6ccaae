"""The move of issue 48: app/'s flat service floor into packages by capability.

``python -m scripts.move_services`` rewrites every import, dotted name (``app.table_commits``)
and path (``app/table_commits.py``) of the moved modules in the given files (default: every
``.py``, ``.md`` and ``.toml`` of the checkout). Kept so that a branch written against the flat
floor can be brought onto the packages with one command (``--files`` a list), and as the
record of where each module went.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# old module (under app.) -> new module (under app.)
MOVES = {
    # catalog core: what tables and views share, the one commit loop, paging, the deletion policy
    "entries": "catalog.entries",
    "commits": "catalog.commits",
    "paging": "catalog.paging",
    "deletion": "catalog.deletion",
    # tables
    "tables": "tables.service",
    "table_loading": "tables.loading",
    "table_commits": "tables.committing",
    "table_access": "tables.access",
    "table_memory": "tables.memory",
    "metrics_reports": "tables.metrics_reports",
    "plans": "tables.plans",
    "previews": "tables.previews",
    # views
    "views": "views.service",
    # namespaces and warehouses
    "namespaces": "namespaces.service",
    "warehouses": "namespaces.warehouses",
    # the recycle bin and protection marks
    "recycle_bin": "recycle_bin.service",
    "protection": "recycle_bin.protection",
    # events: what a change records, the feed, push delivery
    "change_events": "events.changes",
    "events_feed": "events.feed",
    "event_sinks": "events.sinks",
    "publisher": "events.publisher",
    "publisher_kafka": "events.kafka",
    "webhooks": "events.webhooks",
    # management
    "management": "management.service",
    "management_operations": "management.operations",
    "management_rights": "management.rights",
    "principals": "management.principals",
    # storage access: client config and credentials modes, remote signing, S3 requests
    "storage_access": "storage_access.delegation",
    "signing": "storage_access.signing",
    "s3_requests": "storage_access.s3_requests",
    "bulk_deletes": "storage_access.bulk_deletes",
    # maintenance (issue 48's second pass): the service, its runs and jobs, the rewrites, Spark
    "maintenance": "maintenance.service",
    "maintenance_runs": "maintenance.runs",
    "maintenance_jobs": "maintenance.jobs",
    "maintenance_context": "maintenance.context",
    "maintenance_options": "maintenance.options",
    "maintenance_compaction": "maintenance.compaction",
    "maintenance_data": "maintenance.data",
    "maintenance_files": "maintenance.files",
    "maintenance_lease": "maintenance.lease",
    "maintenance_spark": "maintenance.spark",
    "maintenance_trigger": "maintenance.trigger",
    # submitted by path (``maintenance.spark.JOB_SCRIPT``: next to it), never imported
    "spark_rewrite_job": "maintenance.spark_rewrite_job",
}

_NAMES = "|".join(sorted(MOVES, key=len, reverse=True))
# ``from app import a, b as c`` of moved modules
_FROM_APP = re.compile(r"^(\s*)from app import (.+)$", re.MULTILINE)
# ``app.tables`` (a module name, not ``flask_app.tables``, not ``app.tables_x``)
# (and not already a new one: ``app.tables.service`` stays, so a second run changes nothing)
_NEW = "|".join(sorted({new.partition(".")[2] for new in MOVES.values()}, key=len, reverse=True))
_DOTTED = re.compile(rf"(?<![\w.])app\.({_NAMES})(?![\w])(?!\.(?:{_NEW})\b)(?! import (?:{_NEW})\b)")
# ``app/tables.py``
_PATH = re.compile(rf"(?<![\w/])app/({_NAMES})\.py\b")  # a new path has a slash more


def _from_app(match: re.Match[str]) -> str:
    indent, names = match.group(1), match.group(2)
    if names.strip().startswith("("):
        return match.group(0)
    lines = []
    kept = []
    for part in (p.strip() for p in names.split(",")):
        name, _, alias = part.partition(" as ")
        name, alias = name.strip(), alias.strip()
        if name in MOVES:
            package, _, module = MOVES[name].rpartition(".")
            local = alias or name
            lines.append(f"{indent}from app.{package} import {module}" + (f" as {local}" if local != module else ""))
        else:
            kept.append(part)
    if kept:
        lines.insert(0, f"{indent}from app import {', '.join(kept)}")
    return "\n".join(lines)


def rewrite(text: str) -> str:
    text = _DOTTED.sub(lambda m: f"app.{MOVES[m.group(1)]}", text)
    text = _FROM_APP.sub(_from_app, text)  # after: its ``from app.storage_access import x`` is new
    return _PATH.sub(lambda m: f"app/{MOVES[m.group(1)].replace('.', '/')}.py", text)


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split() if name.endswith((".py", ".md", ".toml", ".cfg", "Makefile"))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", nargs="*", type=Path, help="files to rewrite (default: every tracked one)")
    parser.add_argument("--move", action="store_true", help="also git mv the modules (done once)")
    options = parser.parse_args(argv)
    if options.move:
        for old, new in MOVES.items():
            if not (ROOT / "app" / f"{old}.py").exists():  # moved by an earlier run
                continue
            target = ROOT / "app" / (new.replace(".", "/") + ".py")
            target.parent.mkdir(exist_ok=True)
            init = target.parent / "__init__.py"
            if not init.exists():
                init.write_text("")
                subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
            subprocess.run(["git", "mv", f"app/{old}.py", str(target.relative_to(ROOT))], cwd=ROOT, check=True)
    changed = 0
    for path in options.files or tracked_files():
        if path.resolve() == Path(__file__).resolve() or not path.is_file():
            continue
        before = path.read_text()
        after = rewrite(before)
        if after != before:
            path.write_text(after)
            changed += 1
    print(f"rewrote {changed} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
