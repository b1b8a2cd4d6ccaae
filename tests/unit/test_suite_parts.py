"""make test's two parts (tests/suite_parts.py, scripts/suite.py): every test in exactly one part,
a module whole in one, the part that starts the shared JVMs holding every test that uses them and
those marked slow."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from pathlib import Path

from scripts.suite import NO_TESTS_COLLECTED, _pump, combined_status
from tests.suite_parts import PARTS, split

TESTS = Path(__file__).resolve().parents[1]
PLAIN = TESTS / "unit" / "test_layers.py"  # imports no JVM support module
IMPORTS_SPARK = TESTS / "integration" / "test_example.py"  # imports spark_support (no shared-driver fixture)
OTHER = TESTS / "api" / "test_health.py"


@dataclass
class CallSpec:
    params: dict[str, object]


@dataclass
class Item:
    path: Path
    name: str
    fixturenames: list[str] = field(default_factory=list)
    callspec: CallSpec | None = None
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_every_item_lands_in_exactly_one_part_and_a_module_stays_whole() -> None:
    items = [
        Item(PLAIN, "a"),
        Item(PLAIN, "b", ["server"]),
        Item(OTHER, "c", ["client"]),
        Item(OTHER, "d", ["keycloak"]),  # one item needs Keycloak: its whole module goes with it
        Item(IMPORTS_SPARK, "e"),
        Item(TESTS / "integration" / "test_nginx.py", "f", callspec=CallSpec({"line": "4.1"})),
        Item(TESTS / "integration" / "test_metrics.py", "g", ["long_sts_job"]),
        Item(TESTS / "integration" / "test_faults.py", "h"),
        Item(TESTS / "integration" / "test_faults.py", "i", markers=("slow",)),  # takes its module along
    ]
    kept = {part: split(items, part)[0] for part in PARTS}
    for part in PARTS:
        assert split(items, part)[1] == [item for item in items if item not in kept[part]]
    assert sorted(item.name for part in PARTS for item in kept[part]) == sorted(item.name for item in items)
    # the modules without a shared JVM first (they run while the JVMs boot), each in its order
    assert [item.name for item in kept["slow"]] == ["h", "i", "c", "d", "e", "f", "g"]
    assert [item.name for item in kept["rest"]] == ["a", "b"]


def test_the_run_passes_only_if_both_parts_pass() -> None:
    assert combined_status({"slow": 0, "rest": 0}) == 0
    assert combined_status({"slow": 1, "rest": 0}) == 1
    assert combined_status({"slow": 0, "rest": 2}) == 2
    # the given paths or filters select nothing in one part: the other's result counts
    assert combined_status({"slow": NO_TESTS_COLLECTED, "rest": 0}) == 0
    assert combined_status({"slow": NO_TESTS_COLLECTED, "rest": 1}) == 1
    assert combined_status({"slow": NO_TESTS_COLLECTED, "rest": NO_TESTS_COLLECTED}) == NO_TESTS_COLLECTED


def test_a_parts_failed_tests_are_kept_for_the_end_of_the_log() -> None:
    """The summary lines pytest prints for failures and errors are shown as they come and kept, to
    be printed again after the parts' exit lines (a CI log may be cut to its tail)."""
    session = io.BytesIO(
        b"tests/api/test_x.py .F\n"
        b"FAILED tests/api/test_x.py::test_b - AssertionError: 12 <= 11\n"
        b"ERROR tests/api/test_y.py::test_c - RuntimeError\n"
        b"== 1 failed, 1 passed, 1 error ==\n"
    )
    out, failures = io.BytesIO(), []
    _pump(b"[rest] ", session, out, threading.Lock(), failures)
    assert out.getvalue().splitlines()[1] == b"[rest] FAILED tests/api/test_x.py::test_b - AssertionError: 12 <= 11"
    assert failures == [
        b"FAILED tests/api/test_x.py::test_b - AssertionError: 12 <= 11\n",
        b"ERROR tests/api/test_y.py::test_c - RuntimeError\n",
    ]
