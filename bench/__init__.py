"""Catalog benchmarks: ``make bench`` (see bench/run.py and docs/benchmarks.md)."""
