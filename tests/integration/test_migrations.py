"""Migrations applied by several workers at once: each file exactly once, nobody fails."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg

from storage.migrate import migrate, migration_files


def test_concurrent_workers_apply_each_migration_once(services):
    name = "mig_" + uuid.uuid4().hex[:8]
    if services.postgres is not None:  # as in production: the catalog role owns one schema there
        services.postgres.create_catalog_database(name)
    else:
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    url = services.database_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(lambda _: migrate(url), range(4)))
        expected = [file_name for _, file_name, _ in migration_files()]
        applied_by_someone = sorted(name for applied in results for name in applied)
        assert applied_by_someone == sorted(expected)
        assert sum(1 for applied in results if applied) == 1
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT name FROM growler_schema_migrations ORDER BY version").fetchall()
            assert [row[0] for row in rows] == expected
            tables = {
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                ).fetchall()
            }
            assert {"warehouse", "namespace", "catalog_entry", "purge_job", "metrics_report"} <= tables
            compression = conn.execute(
                "SELECT attcompression FROM pg_attribute"
                " WHERE attrelid = 'catalog_entry'::regclass AND attname = 'metadata'"
            ).fetchone()[0]
            assert compression == "l"  # Debian's PostgreSQL has lz4; the migration switched to it
        assert migrate(url) == []
    finally:
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
