"""The benchmark's own arithmetic (bench/): percentiles, lineage, counters, report. No servers."""

from __future__ import annotations

from bench import bodies, report
from bench.load import commit_counters, lineage, percentile, summarize


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 90) == 90
    assert percentile(values, 99) == 99
    assert percentile([7.0], 99) == 7
    assert percentile([], 50) is None


def test_summarize_reports_milliseconds_and_rate():
    from collections import Counter

    stats = summarize([0.010, 0.020, 0.030, 0.040], 2.0, Counter({200: 4}), 0)
    assert stats["requests"] == 4 and stats["rps"] == 2.0
    assert stats["latency_ms"]["p50"] == 20.0 and stats["latency_ms"]["max"] == 40.0
    assert stats["statuses"] == {"200": 4}


def test_lineage_follows_main_back_to_the_root():
    metadata = {
        "location": "s3://b/t",
        "refs": {"main": {"snapshot-id": 3, "type": "branch"}},
        "snapshots": [
            {"snapshot-id": 1},
            {"snapshot-id": 2, "parent-snapshot-id": 1},
            {"snapshot-id": 3, "parent-snapshot-id": 2},
            {"snapshot-id": 9, "parent-snapshot-id": 1},  # dropped from main: "lost" if acknowledged
        ],
    }
    assert lineage(metadata) == [3, 2, 1]
    assert bodies.table_state(metadata) == ("s3://b/t", 3, 0)


def test_append_body_asserts_the_parent():
    body = bodies.append("s3://b/t/", 5, 2, 4)
    assert body["requirements"] == [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 4}]
    assert body["updates"][0]["snapshot"]["parent-snapshot-id"] == 4
    assert body["updates"][0]["snapshot"]["manifest-list"].startswith("s3://b/t/metadata/")
    assert body["updates"][1]["snapshot-id"] == 5
    assert len(bodies.schema(40)["fields"]) == 40


def test_commit_counters_read_table_commits_only():
    text = "\n".join([
        '# HELP growler_commit_retries_total x',
        'growler_commit_retries_total{kind="table"} 3.0',
        'growler_commit_retries_total{kind="transaction"} 5.0',
        'growler_commits_total{kind="table",outcome="committed"} 10.0',
        'growler_commits_total{kind="table",outcome="conflict"} 2.0',
    ])
    assert commit_counters(text) == {"server_retries": 3.0, "commits_committed": 10.0, "commits_conflict": 2.0}


def test_report_ratios_targets_and_table():
    def read(rps, p99):
        return {"rps": rps, "errors": 0, "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": p99}}

    growler = {"W3": read(2500.0, 15.0), "W4": read(3500.0, 5.0), "W8_big": read(900.0, 12.0),
               "W8_small": read(1000.0, 10.0), "W7": {"commits_per_s": 70.0, "lost": 0, "latency_ms": {}},
               "W9": {"workers": [{"rss_mb": 120.0}, {"rss_mb": 110.0}]}}
    peer = {"W3": read(1250.0, 30.0), "W4": {"n/a": "no ETag"}}
    ratios = report.compute_ratios(growler, peer)
    assert ratios["W3"] == 2.0 and ratios["W4"] is None
    targets = report.evaluate_targets(growler)
    assert targets["W3"]["met"] and targets["W4"]["met"] and targets["W8"]["met"] and targets["W9"]["met"]
    assert targets["W6"]["met"] is None  # not measured
    doc = {"results": {"growler": growler, "peer": peer}, "ratios": ratios, "targets": targets,
           "machine": {"cores": 2}, "settings": {"plan": {"w8_big": 10000, "w8_small": 100}}}
    text = report.render_markdown(doc)
    assert "| W4 loadTable, If-None-Match -> 304 |" in text and "n/a" in text
    assert "10,000 tables" in text
