"""The suite in two parts that run side by side (``make test``: ``scripts/suite.py``).

Most of the suite's wall time is waiting - for the long STS job (some 16 minutes: it must outlive
SeaweedFS's shortest credentials, 900 s), JVMs booting, tokens expiring, servers restarting - so
one pytest session used about one core of two. ``make test`` runs two sessions at once, each
with its own PostgreSQL, SeaweedFS and servers on throwaway ports, and every test in exactly one
of them (``--part``, chosen here at collection; without it a session runs every test):

* ``slow``: every test module that uses a JVM the session shares or starts in the background
  (the Spark drivers, Keycloak, the Kafka broker: ``spark_support``, ``keycloak_support``,
  ``kafka_support``) or the long STS job - those start once per run, in this part only - and
  every module with a test marked ``slow`` (stress, restarts). The STS job sets this part's
  length; its tests run while it waits.
* ``rest``: everything else - unit, api and conformance tests, and the integration tests that
  need no shared JVM and are not marked slow.

A whole module goes to one part (its module-scoped servers start once), decided by what the
module's tests use - a fixture or parameter that needs a shared JVM -, how they are marked and
what the module imports, not by file names: a module split in two, or a new one, lands where its
JVMs are.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PARTS = ("slow", "rest")
# What starts or takes a JVM shared by the session (tests/integration/conftest.py).
JVM_FIXTURES = frozenset({"spark", "second_spark", "keycloak", "kafka_broker", "long_sts_job"})
JVM_PARAMS = frozenset({"spark", "line"})  # a Spark line's driver, prestarted after collection
JVM_SUPPORT = ("spark_support", "keycloak_support", "kafka_support", "sts_long_job_support")


@cache
def _imports_jvm_support(path: Path) -> bool:
    """The module imports one of ``JVM_SUPPORT`` (at its top or in a function)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return any(name.rsplit(".", 1)[-1] in JVM_SUPPORT for name in names)


def _needs_jvm(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return bool(JVM_FIXTURES & set(getattr(item, "fixturenames", ()))) or bool(JVM_PARAMS & set(params))


def _module_path(item: pytest.Item) -> Path:
    return Path(str(item.path))


def split(items: list[pytest.Item], part: str) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected) for ``part``: the modules of the ``slow`` part are those with an item
    that needs a shared JVM or is marked slow, or that import a JVM's support module; the others
    are ``rest``'s."""
    jvm_modules = {_module_path(item) for item in items if _needs_jvm(item)}
    jvm_modules |= {path for path in {_module_path(item) for item in items} if _imports_jvm_support(path)}
    slow_modules = jvm_modules | {_module_path(item) for item in items if item.get_closest_marker("slow")}
    kept, dropped = [], []
    for item in items:
        in_slow = _module_path(item) in slow_modules
        (kept if in_slow == (part == "slow") else dropped).append(item)
    if part == "slow":
        # The modules without a shared JVM first: they run while the JVMs boot (started after
        # collection), so the Spark tests meet booted drivers on a calmer machine, as in one session.
        kept.sort(key=lambda item: _module_path(item) in jvm_modules)
    return kept, dropped
