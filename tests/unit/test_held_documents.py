"""HeldDocuments: each table's last answered text, within a byte budget, least recently used first out."""

from __future__ import annotations

from app.tables.memory import HeldDocument, HeldDocuments


def key(name: str) -> tuple[int, tuple[str, ...], str]:
    return (1, ("db",), name)


def test_the_budget_evicts_the_least_recently_used_tables():
    held = HeldDocuments(budget_bytes=800)
    for name in ("a", "b", "c", "d", "e", "f", "g", "h"):
        held.keep(key(name), 1, f"s3://w/{name}/00001.metadata.json", name * 100)
    assert held.get(key("a")) == HeldDocument(1, "s3://w/a/00001.metadata.json", "a" * 100)  # now the newest
    held.keep(key("i"), 2, "s3://w/i/00001.metadata.json", "i" * 100)
    assert held.get(key("b")) is None  # the least recently used went
    assert all(held.get(key(name)) is not None for name in ("a", "c", "d", "e", "f", "g", "h", "i"))


def test_a_new_version_replaces_the_old_one_and_its_bytes():
    held = HeldDocuments(budget_bytes=800)
    for version in range(1, 20):  # one table, many versions: only the last one counts
        held.keep(key("t"), 7, f"s3://w/t/{version:05d}.metadata.json", "x" * 100)
    assert held.get(key("t")).location == "s3://w/t/00019.metadata.json"
    for name in "abcdefg":
        held.keep(key(name), 1, "s3://w/other.metadata.json", "y" * 100)
    assert held.get(key("t")) is not None  # 8 x 100 bytes fit: the old versions took no room


def test_a_document_over_an_eighth_of_the_budget_is_not_held():
    held = HeldDocuments(budget_bytes=800)
    held.keep(key("small"), 1, "s3://w/small.metadata.json", "s" * 100)
    held.keep(key("big"), 1, "s3://w/big.metadata.json", "b" * 101)
    assert held.get(key("big")) is None
    assert held.get(key("small")) is not None  # and it evicted nothing


def test_a_table_that_grew_too_big_lets_go_of_its_older_version():
    held = HeldDocuments(budget_bytes=800)
    held.keep(key("t"), 1, "s3://w/t/00001.metadata.json", "x" * 100)
    held.keep(key("t"), 1, "s3://w/t/00002.metadata.json", "x" * 101)
    assert held.get(key("t")) is None
    for name in "abcdefgh":
        held.keep(key(name), 1, "s3://w/other.metadata.json", "y" * 100)
    assert all(held.get(key(name)) is not None for name in "abcdefgh")  # the old version took no room
