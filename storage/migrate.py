"""Versioned SQL migrations, applied at start-up under an advisory lock.

Several gunicorn workers (or replicas) start at once; the session-level advisory lock makes
exactly one of them apply each pending file while the others wait and then find nothing to do.
Each file runs in its own transaction and is recorded with it, so a crash never leaves a file
half-applied.
"""

from __future__ import annotations

import logging
import re
from importlib import resources

import psycopg

log = logging.getLogger(__name__)

# An arbitrary constant that names "growler schema migrations" in pg_advisory_lock.
MIGRATION_LOCK_ID = 0x6772_6F77_6C65_72
_FILE_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every file in storage/migrations, in version order."""
    found = []
    for entry in resources.files("storage.migrations").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions in storage/migrations: {versions}")
    return found


def migrate(database_url: str) -> list[str]:
    """Apply pending migrations; returns the names of the files applied by this call."""
    applied: list[str] = []
    with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_ID,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS growler_schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM growler_schema_migrations")}
            for version, name, sql in migration_files():
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(sql)
                    conn.execute(
                        "INSERT INTO growler_schema_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
                log.info("applied migration %s", name)
                applied.append(name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return applied


def main() -> int:
    """``python -m storage.migrate``: apply pending migrations to ``GROWLER_DATABASE_URL`` and exit.

    The deployment's migration step (the Helm chart's pre-install/pre-upgrade Job, or a one-off
    container): replicas starting at the same time wait on the same advisory lock, so running it
    alongside them, or twice at once, applies each file exactly once.
    """
    import os
    import sys

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    database_url = os.environ.get("GROWLER_DATABASE_URL", "")
    if not database_url:
        print("GROWLER_DATABASE_URL is not set", file=sys.stderr)
        return 2
    try:
        applied = migrate(database_url)
    except psycopg.Error as exc:
        print(f"migration failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
