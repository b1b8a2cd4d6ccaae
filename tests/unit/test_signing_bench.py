"""bench.signing runs: the in-process figure of the signRequest workload."""

from __future__ import annotations


def test_signing_bench_signs_in_process():
    from bench.signing import in_process

    result = in_process(0.2)
    assert result["signatures"] >= 100 and result["per_second"] > 0
