"""What a run does (``Plan``: its sizes, durations and ``BENCH_ONLY`` selection) and where it does it.

Namespaces: exactly 100 top-level ones, ``ns000`` .. ``ns099`` (so W2 lists 100), each with a
few properties. Some hold the workloads' tables:

  ns000  W1 (loadNamespaceMetadata)
  ns001  W3/W4: ``wide``, 40 columns, 100 snapshots (appended over HTTP)
  ns002  W5: createTable targets
  ns003  W6: ``w6``, one writer
  ns004  W7: ``w7``, 8 concurrent writers
  ns005  W8: ``bulk_00001`` .. (10,000 tables; Growler: one SQL INSERT, see GrowlerTarget.bulk_tables;
         the peer has no database to write to, so it gets them over HTTP)
  ns006  W8: ``t000`` .. ``t099`` (100 tables, over HTTP)
  ns099  W12: ``planned``, 2,000 data files in its manifests (PyIceberg; bench/planning.py)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

NAMESPACES = [f"ns{i:03d}" for i in range(100)]
NS_W1, NS_W3, NS_W5, NS_W6, NS_W7, NS_W8_BIG, NS_W8_SMALL = NAMESPACES[:7]
NAMESPACE_PROPERTIES = {"owner": "bench", "comment": "growler benchmark namespace", "retention-days": "30"}


@dataclass(frozen=True)
class Plan:
    quick: bool
    seed: int
    concurrency: int
    wrk_threads: int
    warmup_s: int
    duration_s: int
    wide_columns: int
    wide_snapshots: int
    w5_count: int
    w5_warmup: int
    w6_count: int
    w6_warmup: int
    w7_writers: int
    w7_count: int
    w7_warmup: int
    w8_big: int
    w8_small: int
    seed_concurrency: int
    # W10 (bench/tails.py): seconds measured after a start or a recycle
    tail_s: int = 10
    # W11 (bench/history.py): snapshot counts, appends and seconds of loads measured at each
    history_levels: tuple[int, ...] = (100, 1000, 4000)
    history_commits: int = 40
    history_load_s: int = 5
    w12_files: int = 2000
    w12_commits: int = 4
    w12_concurrency: int = 4
    w12_count: int = 200
    w12_warmup: int = 20
    # W13 (bench/random_tables.py): a catalog of w13_tables in w13_namespaces, measured w13_s seconds
    w13_tables: int = 100_000
    w13_namespaces: int = 100
    w13_s: int = 60
    # W14 (bench/million.py): W13's catalog grown to w14_tables in w14_namespaces of 1,000 each
    w14_tables: int = 1_000_000
    w14_namespaces: int = 1000
    w14_s: int = 30
    w14_listed_namespaces: int = 100
    only: tuple[str, ...] = ()  # BENCH_ONLY: the workloads to run (W1 .. W12); empty: all

    @classmethod
    def make(cls, quick: bool, seed: int, wrk_threads: int, only: tuple[str, ...] = ()) -> Plan:
        if quick:
            return cls(
                quick,
                seed,
                16,
                wrk_threads,
                0,
                1,
                40,
                100,
                32,
                16,
                10,
                2,
                8,
                2,
                1,
                300,
                100,
                16,
                tail_s=2,
                history_levels=(20, 100),
                history_commits=5,
                history_load_s=1,
                w12_count=40,
                w12_warmup=8,
                w13_tables=2_000,
                w13_namespaces=10,
                w13_s=3,
                w14_tables=5_000,
                w14_namespaces=25,
                w14_s=2,
                w14_listed_namespaces=5,
                only=only,
            )
        return cls(
            quick, seed, 16, wrk_threads, 5, 20, 40, 100, 2000, 160, 300, 20, 8, 40, 2, 10_000, 100, 16, only=only
        )

    def runs(self, workload: str) -> bool:
        name = workload.upper()  # BENCH_ONLY is read upper-cased: W10_start must match W10_START
        return not self.only or name in self.only or name.split("_")[0] in self.only

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
