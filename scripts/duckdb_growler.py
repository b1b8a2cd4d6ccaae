"""DuckDB attached to Growler as a user configures it: an OAuth2 client credential and the
catalog's URL, nothing about storage (DuckDB asks for vended credentials). The extensions come from
their PyPI wheels (requirements-test.txt), loaded from the wheel's file with autoinstall and
autoload off: nothing is fetched from extensions.duckdb.org. Used by the DuckDB tests
(tests/integration/test_duckdb.py) and ``make bench-maintenance`` (bench/maintenance_engines.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

EXTENSIONS = ("httpfs", "avro", "iceberg")


def extension_file(name: str) -> str:
    """The extension binary shipped in the ``duckdb-extension-<name>`` wheel, for this DuckDB."""
    import duckdb

    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or spec.origin is None:
        raise RuntimeError(f"duckdb-extension-{name} is not installed (requirements-test.txt)")
    path = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise RuntimeError(f"no {path}")
    return str(path)


def attached(base_url: str, warehouse: str, client_id: str, secret: str) -> Any:
    """A fresh in-memory DuckDB with ``warehouse`` attached as ``growler`` (the caller closes it)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        for name in EXTENSIONS:
            con.execute(f"INSTALL '{extension_file(name)}'")
            con.execute(f"LOAD {name}")
        con.execute(
            f"""CREATE SECRET growler_secret (
                TYPE iceberg,
                CLIENT_ID '{client_id}',
                CLIENT_SECRET '{secret}',
                OAUTH2_SERVER_URI '{base_url}/v1/oauth/tokens'
            )"""
        )
        con.execute(
            f"""ATTACH '{warehouse}' AS growler (
                TYPE iceberg,
                ENDPOINT '{base_url}',
                SECRET growler_secret,
                ACCESS_DELEGATION_MODE 'vended_credentials'
            )"""
        )
    except BaseException:
        con.close()
        raise
    return con
