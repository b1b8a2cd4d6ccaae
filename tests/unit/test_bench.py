"""The benchmark's own arithmetic (bench/): percentiles, lineage, counters, report. No servers."""

from __future__ import annotations

from bench import bodies, goals, report
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
    text = "\n".join(
        [
            "# HELP growler_commit_retries_total x",
            'growler_commit_retries_total{kind="table"} 3.0',
            'growler_commit_retries_total{kind="transaction"} 5.0',
            'growler_commits_total{kind="table",outcome="committed"} 10.0',
            'growler_commits_total{kind="table",outcome="conflict"} 2.0',
        ]
    )
    assert commit_counters(text) == {"server_retries": 3.0, "commits_committed": 10.0, "commits_conflict": 2.0}


def test_report_ratios_targets_and_table():
    def read(rps, p99):
        return {"rps": rps, "errors": 0, "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": p99}}

    growler = {
        "W3": read(2500.0, 15.0),
        "W4": read(3500.0, 5.0),
        "W8_big": read(900.0, 12.0),
        "W8_small": read(1000.0, 10.0),
        "W7": {"commits_per_s": 70.0, "lost": 0, "latency_ms": {}},
        "W9": {"workers": [{"rss_mb": 120.0}, {"rss_mb": 110.0}]},
    }
    peer = {"W3": read(1250.0, 30.0), "W4": {"n/a": "no ETag"}}
    ratios = report.compute_ratios(growler, peer)
    assert ratios["W3"] == 2.0 and ratios["W4"] is None
    targets = goals.evaluate_targets(growler)
    assert targets["W3"]["met"] and targets["W4"]["met"] and targets["W8"]["met"] and targets["W9"]["met"]
    assert targets["W6"]["met"] is None  # not measured
    doc = {
        "results": {"growler": growler, "peer": peer},
        "ratios": ratios,
        "targets": targets,
        "machine": {"cores": 2},
        "settings": {"plan": {"w8_big": 10000, "w8_small": 100}},
    }
    text = report.render_markdown(doc)
    assert "| W4 loadTable, If-None-Match -> 304 |" in text and "n/a" in text
    assert "10,000 tables" in text


def test_planning_workload_filter_matches_its_expected_task_count():
    """W12's filter keeps category a among the first half of the files (ids ``i*10 .. i*10+9``)."""
    from bench import planning

    files = 2000
    keep = [
        i
        for i in range(files)
        if planning.CATEGORIES[i % 3] == "a" and i * 10 < planning.plan_filter(files)["right"]["value"]
    ]
    assert planning.expected_tasks(files) == len(keep) == 334
    assert planning.plan_filter(files)["left"] == {"type": "eq", "term": "category", "value": "a"}


def test_bench_only_selects_workloads():
    from bench.plan import Plan

    assert Plan.make(True, 7, 1).runs("W3") and Plan.make(True, 7, 1).runs("W12")
    only = Plan.make(True, 7, 1, ("W12", "W8"))
    assert only.runs("W12") and only.runs("W8_big") and only.runs("W8_small")
    assert not only.runs("W1") and not only.runs("W9")
    assert Plan.make(True, 7, 1).w12_files >= 1000 and Plan.make(False, 7, 1).w12_files >= 1000


def test_report_shows_the_planning_workload_per_plan():
    w12 = {
        "plans_per_s": 12.5,
        "plans": 40,
        "errors": 0,
        "latency_ms": {"p50": 80.0, "p90": 120.0, "p99": 150.0},
        "cpu_ms_per_plan": {"app": 90.0, "postgres": 10.0, "s3": 0.0, "server_total": 100.0},
        "cpu_ms_per_request": {"app": 1.0},
        "tasks_per_plan": 334,
        "polls_per_plan": 3.5,
        "table": {"data_files": 2000},
    }
    doc = {"results": {"growler": {"W12": w12}}, "machine": {"cores": 2}, "settings": {"plan": {"w12_concurrency": 4}}}
    text = report.render_markdown(doc)
    row = next(line for line in text.splitlines() if line.startswith("| W12 scan plan of a filter, 2,000 data files"))
    assert "| 12.5 | 80.00 | 120 | 150 | 0 |" in row
    cpu_rows = [line for line in text.splitlines() if line.startswith("| W12")]
    assert any("| 90.00 | 10.00 | 0.00 | 100 |" in line for line in cpu_rows)
    assert "334 file scan tasks of 2000 data files" in text and "3.5 polls" in text


def test_history_seeding_batch_is_one_chain_on_main():
    import random

    from bench import history

    body = history.append_batch("s3://b/t", random.Random(1), sequence=7, parent=42, count=3)
    snapshots = [u["snapshot"] for u in body["updates"] if u["action"] == "add-snapshot"]
    assert [s["sequence-number"] for s in snapshots] == [8, 9, 10]
    assert [s.get("parent-snapshot-id") for s in snapshots] == [
        42,
        snapshots[0]["snapshot-id"],
        snapshots[1]["snapshot-id"],
    ]
    assert body["updates"][-1] == {
        "action": "set-snapshot-ref",
        "ref-name": "main",
        "type": "branch",
        "snapshot-id": snapshots[-1]["snapshot-id"],
    }
    assert body["requirements"] == [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42}]


def test_report_tails_and_history():
    def level(snapshots, commit_p50):
        return {
            "snapshots": snapshots,
            "commit": {"latency_ms": {"p50": commit_p50}, "cpu_ms_per_request": {"server_total": 9.5}},
            "load": {"rps": 800.0, "latency_ms": {"p50": 3.0}, "cpu_ms_per_request": {"server_total": 1.2}},
            "load_response_bytes": 123456,
        }

    tail = {"rps": 900.0, "latency_ms": {"p50": 2.0, "p99": 15.0, "p999": 40.0, "max": 80.0}}
    growler = {
        "W10_start": tail,
        "W10_recycle": {
            **tail,
            "latency_ms": {**tail["latency_ms"], "p99": 900.0},
            "worker_cpu_s": {"7": None, "8": 9.9},
        },
        "W11": {"levels": [level(100, 11.0), level(1000, 15.0), level(4000, 21.0)]},
    }
    peer = {"W10_start": tail, "W10_recycle": {"n/a": "one process"}, "W11": {"levels": [level(100, 20.0)]}}
    targets = goals.evaluate_targets(growler)
    assert targets["W10_start"]["met"] and not targets["W10_recycle"]["met"]
    assert targets["W11"]["met"]  # 21 ms <= 25 ms and <= 2 x 11 ms
    growler["W11"]["levels"][-1]["commit"]["latency_ms"]["p50"] = 24.0
    assert not goals.evaluate_targets(growler)["W11"]["met"]  # under 25 ms but more than twice 11 ms
    text = report.render_markdown(
        {
            "results": {"growler": growler, "peer": peer},
            "targets": targets,
            "machine": {"cores": 2},
            "settings": {"plan": {}},
        }
    )
    assert "| W10 W1 in the first seconds after a worker recycle | 900 | 2.00 | 900 | 40.00 | 80.00 | n/a |" in text
    assert "| 4,000 | 24.00 | 9.50 | 800 | 3.00 | 1.20 | 123,456 | 20.00 | 800 |" in text
    assert "W10 W1 in the first seconds after a worker recycle: -/9.9." in text  # the recycled worker: -


def test_report_shows_the_floors_of_the_stack():
    floor = {
        "W0_read": {"rps": 9200.0, "latency_ms": {"p99": 3.5}, "cpu_ms_per_request": {"app": 0.16, "postgres": 0.03}},
        "W0_put": {"bytes": 1430000, "latency_ms": {"p50": 12.0, "min": 11.1}, "s3_cpu_ms_per_put": 12.09},
    }
    doc = {
        "results": {"growler": {"W1": {"rps": 4600.0}}, "peer": {"W1": {"rps": 7755.0}}, "floor": floor},
        "machine": {"cores": 2},
        "settings": {"plan": {}},
    }
    text = report.render_markdown(doc)
    assert (
        "one psycopg_pool query and nothing else: 9,200 req/s, p99 3.50 ms, 0.16 ms app + 0.03 ms PostgreSQL CPU"
        " a request (Growler 4,600, peer 7,755 req/s)" in text
    )
    assert "one PUT of 1,430,000 bytes" in text and "p50 12.00 ms (min 11.10), 12.09 ms of SeaweedFS CPU" in text
    floor["W0_put"] = {"failed": "RuntimeError: weed did not start"}
    assert "metadata-file PUT floor: failed (RuntimeError: weed did not start)" in report.render_markdown(doc)
    del doc["results"]["floor"]
    assert "Floors of the stack" not in report.render_markdown(doc)


def test_targets_against_the_peer_say_what_the_stack_alone_reaches():
    def read(rps, p99, app, postgres):
        return {"rps": rps, "latency_ms": {"p99": p99}, "cpu_ms_per_request": {"app": app, "postgres": postgres}}

    growler = {
        "W1": read(2470.0, 11.2, 0.65, 0.11),
        "W2": read(1912.0, 14.9, 0.30, 0.15),
        "W3": read(1928.0, 25.0, 0.30, 0.10),
        "W5": {"rps": 107.0, "cpu_ms_per_request": {"app": 8.62, "postgres": 1.54, "s3": 3.39}},
        "W6": {"rps": 46.8},
        "W7": {"commits_per_s": 17.5},
    }
    peer = {
        "W1": {"rps": 3617.0},
        "W2": {"rps": 786.0},
        "W3": {"rps": 306.0},
        "W5": {"rps": 154.0, "cpu_ms_per_request": {"server_total": 7.2}},
        "W6": {"rps": 32.4},
        "W7": {"commits_per_s": 21.6},
    }
    floor = {
        "W0_read": {"rps": 3231.0, "cpu_ms_per_request": {"app": 0.44, "postgres": 0.13}},
        "W0_put": {"latency_ms": {"p50": 23.49}},
    }
    targets = goals.evaluate_targets(growler, peer, floor)
    w1 = targets["W1 vs peer"]
    assert w1["met"] is False and w1["measured"] == "0.68x, p99 11.20 ms, 0.76 ms CPU"
    assert w1["floor"] == "the stack alone: 0.89x the peer, 0.57 ms CPU"
    assert targets["W2 vs peer"]["met"] is True  # 2.43x, p99 under 20 ms, 0.45 ms CPU
    assert targets["W2 vs peer"]["floor"] == "the stack alone, W1's one-row read: 0.57 ms CPU"
    assert targets["W3 vs peer"]["met"] is False  # 6.30x, but p99 25 ms
    assert targets["W8_big vs peer"]["met"] is None  # not measured
    assert targets["W5 vs peer"]["floor"] == "PostgreSQL + S3 alone: 4.93 ms CPU a create (the peer: 7.20 in all)"
    assert targets["W6 vs peer"]["met"] is True and targets["W6 vs peer"]["measured"] == "1.44x"  # >= 1.3x
    assert targets["W7 vs peer"]["met"] is False
    assert "W1 vs peer" not in goals.evaluate_targets(growler)  # no peer: only the absolute targets
    text = report.render_markdown(
        {"results": {"growler": growler, "peer": peer}, "targets": targets, "machine": {}, "settings": {"plan": {}}}
    )
    assert (
        "| W1 vs peer | >= 1.0x peer, p99 < 20 ms, <= 0.5 ms CPU (app + PostgreSQL) | 0.68x, p99 11.20 ms, 0.76 ms CPU"
        " | **no** | the stack alone: 0.89x the peer, 0.57 ms CPU |" in text
    )


def test_the_figures_block_to_rewrite_is_on_the_benchmarks_page():
    """``python -m bench.report --docs`` rewrites one block of docs/benchmarks.md, which must hold it."""
    text = report.PAGE.read_text()
    assert report.PAGE.relative_to(report.BENCH_DIR.parent).as_posix() == "docs/benchmarks.md"
    assert text.count(report.BEGIN) == 1 and text.count(report.END) == 1
    assert text.index(report.BEGIN) < text.index(report.END)


def test_report_random_tables_with_what_differs_from_the_shipped_defaults():
    def run(rps, p99, p999, booted, seconds, changed=None):
        return {
            "rps": rps,
            "duration_s": seconds,
            "latency_ms": {"p50": 4.0, "p99": p99, "p999": p999, "max": 90.0},
            "errors": 0,
            "workers_booted": booted,
            "settings_changed": changed or {},
        }

    off = {"values": {"GROWLER_MAX_WORKER_RSS_MB": "0"}, "reason": "the steady state"}
    growler = {
        "W13_first": run(2500.0, 20.0, 45.0, 0, 10.0),
        "W13": run(2600.0, 12.0, 30.0, 0, 60.0),
        "W13_no_recycle": run(2650.0, 11.0, 28.0, 0, 60.0, off),
    }
    targets = goals.evaluate_targets(growler)
    assert targets["W13"]["met"] and targets["W13_recycling"]["met"] and targets["W13_first"]["met"]
    growler["W13"] = run(1500.0, 3000.0, 3900.0, 8, 60.0)  # what count recycling did (issue 40)
    targets = goals.evaluate_targets(growler)
    assert not targets["W13"]["met"] and not targets["W13_recycling"]["met"]
    text = report.render_markdown(
        {
            "results": {"growler": growler},
            "targets": targets,
            "machine": {"cores": 2},
            "settings": {"plan": {}},
            "seeding": {"growler": {"w13_tables": 100_000}},
        }
    )
    assert "out of 100,000, 16 connections" in text
    assert "| W13 first 10 s of fresh workers | 2,500 | 4.00 | 20.00 | 45.00 | 90.00 | 0 | 0 | nothing |" in text
    assert "| W13 shipped defaults, 60 s | 1,500 | 4.00 | 3,000 | 3,900 | 90.00 | 0 | 8 | nothing |" in text
    assert "| W13 recycling off, 60 s | 2,650 |" in text and "`GROWLER_MAX_WORKER_RSS_MB=0`: the steady state |" in text


def test_ab_compares_each_round_with_its_neighbour():
    """bench/ab.py: the paired ratio follows the rounds, not the medians of each side."""
    from bench.ab import paired_ratio, summarize

    a, b = [1.0, 2.0, 1.0], [1.1, 2.2, 1.1]  # B 10% above A in every round, the load moving both
    assert round(paired_ratio(a, b), 3) == 1.1
    runs = [{"requests": 100, "busiest_share": 0.5, "app_ms": x, "pg_ms": 0.1} for x in (0.5, 0.4, 0.6)]
    summary = summarize(runs)
    assert summary["app_ms"]["median"] == 0.5
    assert (summary["app_ms"]["min"], summary["app_ms"]["max"]) == (0.4, 0.6)
    assert summary["requests"] == [100, 100, 100]


def test_every_name_bench_ab_imports_where_it_runs_exists():
    """bench/ab.py imports inside its functions (``serve`` runs in another checkout's directory), so
    no import at load time shows a name a split of bench/ moved away: each is looked up here."""
    import ast
    import importlib
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[2] / "bench" / "ab.py").read_text())
    # the fallbacks in ``except ImportError:`` name where older checkouts (the reference commit
    # bench/baseline.py serves) kept them, not this one's names
    fallbacks = {
        id(node)
        for handler in ast.walk(tree)
        if isinstance(handler, ast.ExceptHandler) and getattr(handler.type, "id", None) == "ImportError"
        for node in ast.walk(handler)
    }
    imported = [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bench")
        if id(node) not in fallbacks
        for alias in node.names
    ]
    assert imported
    missing = [
        f"{module}.{name}"
        for module, name in imported
        if not hasattr(importlib.import_module(module), name) and importlib.util.find_spec(f"{module}.{name}") is None
    ]
    assert missing == []
