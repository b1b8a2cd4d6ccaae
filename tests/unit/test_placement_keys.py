"""The claim's lookup keys (storage/placement.py): looking up by the outermost roots only finds
exactly the rows the keys of every root find, for entries and for namespaces (issue 47: a table's
metadata directory inside its location doubled the claim's range scans)."""

from __future__ import annotations

import itertools

from app.ground.locations import Location
from storage.placement import _SEP, _holder_keys, _namespace_keys, namespace_lookup_roots, outermost

BASE = Location.parse("s3://bucket/wh")
# every folder of a small tree under and around the warehouse location
FOLDERS = [
    "/".join(levels)
    for depth in range(1, 5)
    for levels in itertools.product(["wh", "a", "ab"], repeat=depth)
    if levels[0] == "wh" or depth == 1
]


def _holder_match(key: str, keys: tuple[list[str], list[str], list[str]]) -> bool:
    above, lo, hi = keys
    return key in above or any(low <= key < high for low, high in zip(lo, hi, strict=True))


def _namespace_match(path: list[str], keys: tuple[list[str], list[str], list[str]]) -> bool:
    paths, lo, hi = keys
    split = [[*text.split(_SEP)] for text in paths]
    return path in split or any(low.split(_SEP) <= path < high.split(_SEP) for low, high in zip(lo, hi, strict=True))


def test_outermost_keeps_the_roots_no_other_contains_and_one_of_equal_ones() -> None:
    table = Location.parse("s3://bucket/wh/ns/t")
    metadata = Location.parse("s3://bucket/wh/ns/t/metadata")
    elsewhere = Location.parse("s3://bucket/other/data")
    assert outermost([table, metadata]) == [table]
    assert outermost([metadata, table]) == [table]
    assert outermost([table, metadata, elsewhere]) == [table, elsewhere]
    assert outermost([table, Location.parse("s3://bucket/wh/ns/t/")]) == [Location.parse("s3://bucket/wh/ns/t/")]
    assert outermost([table, Location.parse("s3://other-bucket/wh/ns/t")]) == [
        table,
        Location.parse("s3://other-bucket/wh/ns/t"),
    ]


def test_the_outermost_roots_keys_find_exactly_what_every_roots_keys_find() -> None:
    roots_sets = [
        [Location.parse(f"s3://bucket/{a}"), Location.parse(f"s3://bucket/{b}")]
        for a, b in itertools.product(FOLDERS, repeat=2)
    ]
    checked = 0
    for roots in roots_sets:
        everyone, outer = _holder_keys(roots), _holder_keys(outermost(roots))
        spaces = (_namespace_keys(BASE, roots), _namespace_keys(BASE, namespace_lookup_roots(BASE, roots)))
        for folder in FOLDERS:
            key = f"bucket/{folder}"
            assert _holder_match(key, everyone) == _holder_match(key, outer), (roots, key)
            if folder.startswith("wh/"):
                path = folder.split("/")[1:]
                assert _namespace_match(path, spaces[0]) == _namespace_match(path, spaces[1]), (roots, path)
            checked += 1
    assert checked == len(roots_sets) * len(FOLDERS)
