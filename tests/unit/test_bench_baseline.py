"""The bench's baseline and side-by-side tables (bench/baseline.py, bench/report_tables.py) and
which results file a run writes (bench/run.py). No servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import baseline, report_tables
from bench.run import run_kind

REPO = Path(__file__).resolve().parents[2]


def test_readme_bench_table_is_what_the_report_makes_of_the_committed_results():
    """The README's table is generated (python -m bench.report --docs), never edited by hand: it must
    be exactly the report's rendering of the committed full run."""
    doc = json.loads((REPO / "bench" / "results" / "latest.json").read_text())
    readme = (REPO / "README.md").read_text()
    block = readme.split(report_tables.README_BEGIN, 1)[1].split(report_tables.README_END, 1)[0]
    assert block.strip("\n") == report_tables.readme_table(doc)


def test_committed_results_are_a_full_run():
    doc = json.loads((REPO / "bench" / "results" / "latest.json").read_text())
    assert not doc.get("quick") and not doc["settings"]["plan"]["only"]
    assert doc.get("kind", "full") == "full"


@pytest.mark.parametrize(
    ("quick", "only", "peer", "kind"),
    [
        (False, (), "1", "full"),
        (True, (), "1", "quick"),
        (False, ("W1",), "1", "partial"),
        (False, (), "java", "java"),
        (False, ("W1", "W5"), "java", "java"),
        (True, (), "java", "quick"),
    ],
)
def test_only_a_full_run_replaces_latest_json(quick, only, peer, kind):
    assert run_kind(quick, only, peer) == kind


def test_flagged_past_five_percent_only():
    assert not baseline.flagged(None)
    assert not baseline.flagged(0.8)
    assert not baseline.flagged(1.05)
    assert baseline.flagged(1.051)


def _ab(ratios: dict[str, float]) -> dict:
    return {
        "rounds": 6,
        "seconds": 10,
        "results": {
            key: {
                "total_B_over_A_paired": ratio,
                "app_B_over_A_paired": ratio,
                "total_ms": {"A": 1.0, "B": ratio},
            }
            for key, ratio in ratios.items()
        },
    }


def test_summarize_flags_the_workloads_over_the_threshold():
    summary = baseline.summarize(_ab({"W1": 0.98, "W5": 1.9, "W6": 1.04}), "e24938ec9740")
    assert summary["flagged"] == ["W5"]
    assert summary["workloads"]["W5"] == {
        "reference_ms": 1.0,
        "head_ms": 1.9,
        "ratio": 1.9,
        "app_ratio": 1.9,
        "pg_ms": {"A": None, "B": None},
        "flagged": True,
    }
    assert summary["reference_name"]  # the named reference commit says what it is
    lines = "\n".join(report_tables.baseline_lines(summary))
    assert "| W5 | 1.000 | 1.900 | **1.90x (+90%): over 5%** |" in lines
    assert "| W1 | 1.000 | 0.980 | 0.98x |" in lines
    assert "Flagged (costs more than the reference by over 5%): W5." in lines


def test_readme_table_shows_the_verdict_of_a_run_with_a_baseline():
    doc = {
        "started_at": "2026-12-06T20:00:00Z",
        "versions": {"growler_commit": "abc"},
        "machine": {"cores": 2},
        "results": {
            "growler": {
                "W5": {"rps": 150.0, "latency_ms": {"p99": 200.0}, "cpu_ms_per_request": {"server_total": 11.0}}
            }
        },
        "baseline": baseline.summarize(_ab({"W5": 2.1, "W1": 1.0}), "e24938ec9740"),
    }
    table = report_tables.readme_table(doc)
    assert "| createTable, 16 connections | 150 | 200 | 11.00 | **2.10x (+110%): over 5%** |" in table
    assert "| GET namespace, 16 connections | - | - | - | 1.00x |" in table
    assert "| append commits, one writer | - | - | - | not measured |" in table


def test_java_side_by_side_rows():
    doc = {
        "results": {
            "growler": {"W1": {"rps": 3000.0, "cpu_ms_per_request": {"server_total": 0.5}}},
            "java": {"W1": {"rps": 6000.0, "cpu_ms_per_request": {"server_total": 0.25}}},
        },
        "versions": {"java": {"iceberg": "1.11.0", "java": "openjdk 17"}},
    }
    lines = report_tables.java_lines(doc)
    assert "| GET namespace, 16 connections | 3,000 | 6,000 | 0.50 | 0.50 | 0.25 |" in lines
    assert report_tables.java_lines({"results": {"growler": {}}}) == []


def test_export_refuses_a_revision_that_does_not_exist(tmp_path):
    with pytest.raises(Exception):  # noqa: B017 - git's own error, whichever it is
        baseline.export("no-such-revision-anywhere", cache=tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_docs_java_block_is_what_the_report_makes_of_the_committed_java_run():
    """docs/benchmarks.md's side-by-side with Iceberg's REST reference is generated from
    bench/results/latest-java.json (python -m bench.report --docs), never edited by hand."""
    doc = json.loads((REPO / "bench" / "results" / "latest-java.json").read_text())
    page = (REPO / "docs" / "benchmarks.md").read_text()
    block = page.split("<!-- bench-java:begin -->", 1)[1].split("<!-- bench-java:end -->", 1)[0]
    assert block.strip("\n") == "\n".join(report_tables.java_lines(doc))
