"""The moves of issue 48: app/'s flat service floor into packages by capability, then one public
service class per package.

``python -m scripts.move_services`` rewrites every import, dotted name (``app.table_commits``,
``app.tables.plans``) and path (``app/table_commits.py``, ``app/tables/plans.py``) of the moved
modules in the given files (default: every ``.py``, ``.md`` and ``.toml`` of the checkout). Kept
so that a branch written against the flat floor, or against the first packages, can be brought
onto today's with one command (``--files`` a list), and as the record of where each module went.
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
    "plans": "planning.service",
    "previews": "previews.service",
    # views
    "views": "views.service",
    # namespaces and warehouses
    "namespaces": "namespaces.service",
    "warehouses": "namespaces.warehouses",
    # the recycle bin and protection marks
    "recycle_bin": "recycle_bin.service",
    "protection": "protection.service",
    # events: what a change records, the feed, push delivery
    "change_events": "events.changes",
    "events_feed": "events.feed",
    "event_sinks": "event_sinks.service",
    "publisher": "publisher.service",
    "publisher_kafka": "publisher.kafka",
    "webhooks": "publisher.webhooks",
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

# The second move (issue 48, one public service class per package): package module -> package
# module, both under app. Scan planning and the console's previews were TableService's
# neighbours, protection marks the recycle bin's, the sinks' management and the publisher the
# feed's: each is a capability of its own, with its own Services field.
PACKAGE_MOVES = {
    "tables.plans": "planning.service",
    "tables.previews": "previews.service",
    "recycle_bin.protection": "protection.service",
    "events.sinks": "event_sinks.service",
    "events.publisher": "publisher.service",
    "events.kafka": "publisher.kafka",
    "events.webhooks": "publisher.webhooks",
}

_NAMES = "|".join(sorted(MOVES, key=len, reverse=True))
# ``from app import a, b as c`` of moved modules
_FROM_APP = re.compile(r"^(\s*)from app import (.+)$", re.MULTILINE)
# ``app.tables`` (a module name, not ``flask_app.tables``, not ``app.tables_x``)
# (and not already a new one: ``app.tables.service`` stays, so a second run changes nothing)
# (nor a package module the second move took away: ``app.tables.plans`` is the second move's)
_MODULES = {new.partition(".")[2] for new in MOVES.values()} | {old.partition(".")[2] for old in PACKAGE_MOVES}
_NEW = "|".join(sorted(_MODULES, key=len, reverse=True))
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


_MOVED = "|".join(re.escape(old) for old in sorted(PACKAGE_MOVES, key=len, reverse=True))
# ``app.tables.plans`` (not ``app.tables.plans_x``)
_PACKAGE_DOTTED = re.compile(rf"(?<![\w.])app\.({_MOVED})(?![\w])")
# ``from app.tables import plans`` / ``... import plans as p`` (one name: the ones the code writes)
_FROM_PACKAGE = re.compile(r"^(\s*)from app\.(\w+) import (\w+)( as \w+)?$", re.MULTILINE)
# ``app/tables/plans.py``
_PACKAGE_PATH = re.compile(rf"(?<![\w/])app/({_MOVED.replace(chr(92) + '.', '/')})\.py\b")


def _from_package(match: re.Match[str]) -> str:
    indent, package, name, alias = match.group(1), match.group(2), match.group(3), match.group(4) or ""
    moved = PACKAGE_MOVES.get(f"{package}.{name}")
    if moved is None:
        return match.group(0)
    new_package, _, module = moved.rpartition(".")
    local = alias.removeprefix(" as ") or name
    return f"{indent}from app.{new_package} import {module}" + (f" as {local}" if local != module else "")


def rewrite(text: str) -> str:
    text = _DOTTED.sub(lambda m: f"app.{MOVES[m.group(1)]}", text)
    text = _FROM_APP.sub(_from_app, text)  # after: its ``from app.storage_access import x`` is new
    text = _PATH.sub(lambda m: f"app/{MOVES[m.group(1)].replace('.', '/')}.py", text)
    text = _PACKAGE_DOTTED.sub(lambda m: f"app.{PACKAGE_MOVES[m.group(1)]}", text)
    text = _FROM_PACKAGE.sub(_from_package, text)
    return _PACKAGE_PATH.sub(lambda m: f"app/{PACKAGE_MOVES[m.group(1).replace('/', '.')].replace('.', '/')}.py", text)


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split() if name.endswith((".py", ".md", ".toml", ".cfg", "Makefile"))]


def _move(old: str, new: str) -> None:
    """``git mv`` app/<old>.py to app/<new>.py (dots are folders), unless an earlier run did."""
    source = ROOT / "app" / (old.replace(".", "/") + ".py")
    if not source.exists():  # moved by an earlier run
        return
    target = ROOT / "app" / (new.replace(".", "/") + ".py")
    target.parent.mkdir(exist_ok=True)
    init = target.parent / "__init__.py"
    if not init.exists():
        init.write_text("")
        subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
    subprocess.run(["git", "mv", str(source.relative_to(ROOT)), str(target.relative_to(ROOT))], cwd=ROOT, check=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", nargs="*", type=Path, help="files to rewrite (default: every tracked one)")
    parser.add_argument("--move", action="store_true", help="also git mv the modules (done once)")
    options = parser.parse_args(argv)
    if options.move:
        for old, new in [*MOVES.items(), *PACKAGE_MOVES.items()]:
            _move(old, new)
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
