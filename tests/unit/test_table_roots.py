"""The folders a table owns (``table_roots``): what placement claims and signing and STS serve."""

from __future__ import annotations

from table_metadata_builders import LOCATION, apply, metadata_file, new_table

from app.rules import table as tm
from storage.sts import session_policy


def with_properties(**properties: str) -> tm.TableMetadata:
    return apply(new_table(), {"action": "set-properties", "updates": properties})


def test_a_table_owns_its_location_and_metadata_directory():
    assert tm.table_roots(new_table()) == [LOCATION, f"{LOCATION}/metadata"]
    assert tm.data_path({}) is None


def test_the_metadata_directory_is_that_of_the_current_file_when_given():
    registered = "s3://warehouse/analytics/elsewhere/v3.metadata.json"
    assert tm.table_roots(new_table(), registered) == [LOCATION, "s3://warehouse/analytics/elsewhere"]
    assert tm.table_roots(new_table(), metadata_file(0)) == [LOCATION, f"{LOCATION}/metadata"]


def test_the_data_path_in_javas_order_of_properties():
    """``write.data.path``, else ``write.object-storage.path``, else ``write.folder-storage.path``."""
    table = with_properties(**{"write.folder-storage.path": "s3://w/c/", "write.object-storage.path": "s3://w/b"})
    assert tm.table_roots(table) == [LOCATION, f"{LOCATION}/metadata", "s3://w/b"]
    assert tm.data_path({"write.data.path": "s3://w/a", "write.object-storage.path": "s3://w/b"}) == "s3://w/a"
    assert tm.data_path({"write.folder-storage.path": "s3://w/c/"}) == "s3://w/c"
    assert tm.data_path({"write.data.path": ""}) is None


def test_each_root_once():
    table = with_properties(**{"write.data.path": f"{LOCATION}/metadata/", "write.metadata.path": LOCATION})
    assert tm.table_roots(table) == [LOCATION, f"{LOCATION}/metadata"]
    assert tm.stored_roots(LOCATION + "/", f"{LOCATION}/metadata", None) == [LOCATION, f"{LOCATION}/metadata"]


def test_an_sts_session_policy_covers_every_root_and_lists_only_their_prefixes():
    policy = session_policy(["s3://bkt1/wh/t", "s3://bkt1/wh/t-data/", "s3://bkt2/meta/t"])
    objects, *listings = policy["Statement"]
    assert objects["Resource"] == [
        "arn:aws:s3:::bkt1/wh/t/*",
        "arn:aws:s3:::bkt1/wh/t-data/*",
        "arn:aws:s3:::bkt2/meta/t/*",
    ]
    assert [(s["Resource"], s["Condition"]["StringLike"]["s3:prefix"]) for s in listings] == [
        (["arn:aws:s3:::bkt1"], ["wh/t/*", "wh/t-data/*"]),
        (["arn:aws:s3:::bkt2"], ["meta/t/*"]),
    ]
    assert session_policy("s3://bkt1/wh/t") == session_policy(["s3://bkt1/wh/t"])


def test_the_readers_files_are_the_roots_data_path_included():
    """``table_files`` and ``files_of_entry`` (what commits and the server-side readers check) are
    the table's roots: a file under its own data path is its own, one beside it is not."""
    table = with_properties(**{"write.data.path": "s3://warehouse/analytics/data-x"})
    for files in (
        tm.table_files(table),
        tm.files_of_entry(LOCATION, metadata_file(1), "s3://warehouse/analytics/data-x"),
    ):
        assert files.owns("s3a://warehouse/analytics/data-x/f.parquet") and files.owns(f"{LOCATION}/data/f.parquet")
        assert not files.owns("s3://warehouse/analytics/data-x-other/f.parquet") and not files.owns(
            "s3://warehouse/analytics/data-x"
        )
    # a data path stored before locations were checked owns nothing; the rest stays readable
    stored = tm.files_of_entry(LOCATION, metadata_file(1), "s3://warehouse/analytics?x")
    assert stored.owns(f"{LOCATION}/data/f.parquet") and len(stored.roots) == 1


def test_a_commit_relocates_the_table_when_one_of_its_roots_moves():
    """``relocates`` (refused on a protected table) compares ``table_roots``: the data path's
    properties are the ones ``table_roots`` reads, in Java's order."""
    base = new_table()
    assert not tm.relocates(base, with_properties(**{"some.property": "x"}))
    for key in tm.DATA_PATH_PROPERTIES:
        assert tm.relocates(base, with_properties(**{key: "s3://w/b"})), key
    assert tm.relocates(base, with_properties(**{"write.metadata.path": "s3://w/m"}))
    data = with_properties(**{"write.data.path": "s3://w/a"})
    # a deprecated name under the one that wins moves nothing
    assert not tm.relocates(
        data, apply(data, {"action": "set-properties", "updates": {"write.object-storage.path": "s3://w/z"}})
    )
