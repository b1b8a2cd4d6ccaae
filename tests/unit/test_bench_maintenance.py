"""The maintenance benchmark's report (bench/maintenance_report.py): a results document in,
docs/maintenance.md's Measured block out. No servers, no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import maintenance_report


def reads(rps: float, p99: float) -> dict:
    return {"rps": rps, "latency_ms": {"p50": 10.0, "p99": p99}, "errors": 0}


def document(**overrides) -> dict:
    doc = {
        "kind": "maintenance",
        "started_at": "2026-12-07T00:00:00Z",
        "machine": {"cpu_model": "CPU", "cores": 2, "memory_gb": 23.6, "loadavg_before": 6.1, "loadavg_after": 5.0},
        "busy_machine": True,
        "versions": {"growler_commit": "abc123"},
        "shape": {"appends": 5, "tasks_per_append": 250, "partitions": 8, "rows_per_file": 40},
        "results": {
            "setup": {"seconds": 312.5},
            "before": {"data_files": 10000, "bytes": 28_000_000, "rows": 400000, "partitions": 8},
            "after": {"data_files": 8, "bytes": 9_000_000, "rows": 400000, "partitions": 8},
            "queries_before": {"query": "SELECT 1", "spark_s": [61.2, 40.05], "duckdb_s": [30.0, 28.5]},
            "queries_after": {"query": "SELECT 1", "spark_s": [2.5, 1.25], "duckdb_s": [0.4, 0.3]},
            "reads_without": reads(400.0, 95.5),
            "compaction": {
                "wall_s": 420.0,
                "spark_applications": 1,
                "run": {
                    "status": "succeeded",
                    "outcome": {"seconds": 418.2, "rewritten-data-files-count": 10000, "added-data-files-count": 8},
                },
                "reads_during": {**reads(250.0, 310.25), "run_still_running_after": True},
            },
            "second_run": {
                "wall_s": 1.1,
                "spark_applications": 0,
                "snapshot_unchanged": True,
                "run": {"status": "succeeded", "outcome": {"committed": False, "reason": "nothing to compact"}},
            },
            "settings": {
                "cluster": {"workers": 2, "cores_each": 1, "memory_each": "1g"},
                "policy": {"strategy": "sort"},
            },
        },
    }
    doc.update(overrides)
    return doc


def test_the_measured_block_says_files_queries_the_noop_run_and_read_p99():
    text = maintenance_report.render(document())
    assert "| data files | 10,000 | 8 |" in text
    assert "| Spark query, s | 40.05 (first 61.20) | 1.25 (first 2.50) |" in text
    assert "| DuckDB query, s | 28.50 (first 30.00) | 0.30 (first 0.40) |" in text
    assert "succeeded in 420.0 s wall time" in text and "rewrote 10,000 data files into 8" in text
    assert "0 Spark application(s) started, no new snapshot (no commit)." in text
    assert "without compaction 400.0 req/s, p50 10.00 ms, p99 95.50 ms" in text
    assert "during compaction 250.0 req/s, p50 10.00 ms, p99 310.25 ms" in text
    assert "a busy machine" in text
    assert "had finished before" not in text


def test_a_second_run_that_committed_and_a_missing_duckdb_are_said():
    doc = document()
    doc["results"]["second_run"]["snapshot_unchanged"] = False
    doc["results"]["compaction"]["reads_during"]["run_still_running_after"] = False
    doc["results"]["queries_after"] = {"query": "SELECT 1", "spark_s": [1.0, 1.0], "duckdb_failed": "no extension"}
    text = maintenance_report.render(doc)
    assert "**a new snapshot**" in text
    assert "the run had finished before the measurement ended" in text
    assert "| 40.05 (first 61.20) | 1.00 (first 1.00) |" in text and "| 28.50 (first 30.00) | failed |" in text


def test_docs_block_is_replaced_and_a_failed_run_is_refused(tmp_path: Path):
    page = tmp_path / "maintenance.md"
    page.write_text(f"# M\n\n## Measured\n\n{maintenance_report.BEGIN}\nold\n{maintenance_report.END}\n\ntail\n")
    maintenance_report.update_page(document(), page)
    text = page.read_text()
    assert "old" not in text and "| data files | 10,000 | 8 |" in text and text.endswith("\n\ntail\n")
    assert maintenance_report.BEGIN in maintenance_report.PAGE.read_text()
    failed = tmp_path / "failed.json"
    failed.write_text('{"failed": "RuntimeError: boom"}')
    with pytest.raises(SystemExit):
        maintenance_report.main([str(failed), "--docs"])


def test_a_run_stopped_early_shows_what_it_measured_and_says_so():
    doc = document(failed="KeyboardInterrupt: ")
    del doc["results"]["second_run"]
    text = maintenance_report.render(doc)
    assert text.startswith("**The run stopped early** (KeyboardInterrupt: )")
    assert "| data files | 10,000 | 8 |" in text and "**Second run** on the compacted table: - in - s" in text
    assert maintenance_report.render({"failed": "RuntimeError: boom", "results": {}}).endswith(
        "failed: RuntimeError: boom"
    )
