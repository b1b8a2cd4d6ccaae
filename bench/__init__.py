"""Catalog benchmarks: ``make bench`` (see bench/run.py and README.md, "Benchmarks")."""
