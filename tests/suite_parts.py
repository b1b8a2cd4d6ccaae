"""The suite in two parts that run side by side (``make test``: ``scripts/suite.py``).

Most of the suite's wall time is waiting - for the long STS job (some 16 minutes: it must outlive
SeaweedFS's shortest credentials, 900 s), JVMs booting, tokens expiring, servers restarting - so
one pytest session used about one core of two. ``make test`` runs two sessions at once, each
with its own PostgreSQL, SeaweedFS and servers on throwaway ports, and every test in exactly one
of them (``--part``, chosen here at collection; without it a session runs every test):

* ``jvm``: every test module that uses a JVM the session shares or starts in the background
  (the Spark drivers, Keycloak, the Kafka broker: ``spark_support``, ``keycloak_support``,
  ``kafka_support``) and the long STS job. Those start once per run, in this part only.
* ``rest``: everything else - unit, api and conformance tests, and the integration tests that
  need no shared JVM.

A whole module goes to one part (its module-scoped servers start once), decided by what the
module's tests use - a fixture or parameter that needs a shared JVM - or what the module
imports, not by file names: a module split in two, or a new one, lands where its JVMs are.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

PARTS = ("jvm", "rest")
# What starts or takes a JVM shared by the session (tests/integration/conftest.py).
JVM_FIXTURES = frozenset({"spark", "second_spark", "keycloak", "kafka_broker", "long_sts_job"})
JVM_PARAMS = frozenset({"spark", "line"})  # a Spark line's driver, prestarted after collection
JVM_SUPPORT = ("spark_support", "keycloak_support", "kafka_support", "sts_long_job_support")


@cache
def _imports_jvm_support(path: Path) -> bool:
    text = path.read_text(errors="replace")
    return any(name in text for name in JVM_SUPPORT)


def _needs_jvm(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return bool(JVM_FIXTURES & set(getattr(item, "fixturenames", ()))) or bool(JVM_PARAMS & set(params))


def _module_path(item: pytest.Item) -> Path:
    return Path(str(item.path))


def split(items: list[pytest.Item], part: str) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected) for ``part``: the modules of the ``jvm`` part are those with an item
    that needs a shared JVM or that import a JVM's support module."""
    jvm_modules = {_module_path(item) for item in items if _needs_jvm(item)}
    jvm_modules |= {path for path in {_module_path(item) for item in items} if _imports_jvm_support(path)}
    kept, dropped = [], []
    for item in items:
        in_jvm = _module_path(item) in jvm_modules
        (kept if in_jvm == (part == "jvm") else dropped).append(item)
    return kept, dropped
