"""The location model (app/ground/locations.py): properties over arbitrary text, and the cases that
once deleted other tables' files."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.ground.errors import BadRequest
from app.ground.locations import InvalidLocation, Location, is_allowed, safe_segment

ROOT = Location.parse("s3://warehouse-bucket/root")

# Text that is mostly location-shaped, with every character the model has to think about.
_TRICKY = "/.?#%\\ \t\n\x00\x7f\x85:@;+=&*~'\"<>{}|^`[]é中\ud800"
segment = st.text(alphabet=st.sampled_from(list("abcxyz09-_.") + list(_TRICKY)), max_size=8)
tail = st.lists(segment, max_size=6).map("/".join)
schemes = st.sampled_from(["s3://", "s3a://", "s3n://", "S3://", "file:", "file://", "file:///", "gs://", ""])
buckets = st.sampled_from(["warehouse-bucket", "other-bucket", "a", "UPPER", "b..c", "x@y", "b:9000", ""])


def assert_well_formed(location: Location) -> None:
    assert location.scheme in ("s3", "file")
    assert all(part not in ("", ".", "..") for part in location.segments)
    assert not location.key.startswith("/") and not location.key.endswith("/")
    assert Location.parse(location.uri) == location  # the text it emits names the same object
    assert Location.parse(location.uri).uri == location.uri


@settings(max_examples=2000)
@given(st.text(max_size=80))
@example("s3://warehouse-bucket/root/t?x")
@example("s3://warehouse-bucket/root/t#frag")
@example("s3://warehouse-bucket/root/%2e%2e/x")
@example("s3://warehouse-bucket/root/./x")
@example("s3://warehouse-bucket/root//victim")
@example("file:///etc/passwd")
def test_arbitrary_text_is_refused_or_one_well_formed_location(text):
    try:
        location = Location.parse(text)
    except InvalidLocation as refused:
        assert isinstance(refused, BadRequest)  # a 400, never anything else
        return
    assert_well_formed(location)


@settings(max_examples=3000)
@given(schemes, buckets, tail)
def test_location_shaped_text_maps_to_the_key_s3_would_store(scheme, bucket, rest):
    text = f"{scheme}{bucket}/{rest}"
    try:
        location = Location.parse(text)
    except InvalidLocation:
        return
    assert_well_formed(location)
    if location.scheme == "s3":
        # The key is the text after "bucket/" (one trailing slash aside), byte for byte: what a
        # PUT of that key stores (the minio SDK percent-encodes it on the wire, S3 decodes it).
        assert location.bucket == bucket
        assert location.key == rest.removesuffix("/")
        assert all(c not in location.key for c in "?#%\\")
    under_root = Location.parse(f"s3://warehouse-bucket/root/{rest}") if location.scheme == "s3" else None
    if under_root is not None and under_root.key != ROOT.key:
        assert under_root.is_within(ROOT) and is_allowed(under_root, [ROOT])


@given(st.lists(segment, min_size=1, max_size=5), st.lists(segment, min_size=1, max_size=5))
def test_containment_is_by_segments_never_by_string_prefix(a, b):
    try:
        first = Location.parse("s3://warehouse-bucket/" + "/".join(a))
        second = Location.parse("s3://warehouse-bucket/" + "/".join(b))
    except InvalidLocation:
        return
    assert first.is_within(second) == (first.segments[: len(second.segments)] == second.segments)
    assert first.overlaps(second) == (first.is_within(second) or second.is_within(first))


@given(st.text(min_size=1, max_size=40))
def test_any_name_makes_a_valid_segment(name):
    try:
        made = Location.parse(f"s3://warehouse-bucket/root/{safe_segment(name)}-0123")
    except InvalidLocation as exc:
        # only a name that is not valid UTF-8 (lone surrogates) or too long stays refused
        assert "UTF-8" in exc.message or "longer" in exc.message
        return
    assert made.is_within(ROOT) and len(made.segments) == 2


@pytest.mark.parametrize(
    ("inner", "outer", "within"),
    [
        ("s3://b-1/wh/vic", "s3://b-1/wh/victim", False),
        ("s3://b-1/wh/victim", "s3://b-1/wh/vic", False),
        ("s3://b-1/wh/victim/data", "s3://b-1/wh/victim", True),
        ("s3a://b-1/wh/victim/data", "s3://b-1/wh/victim/", True),
        ("s3://b-1/wh/victim", "s3://b-10/wh", False),
        ("file:/data/x/y", "file:///data/x", True),
        ("file:/data/xy", "file:///data/x", False),
        ("s3://b-1/data/x", "file:///b-1/data", False),
    ],
)
def test_is_within(inner, outer, within):
    assert Location.parse(inner).is_within(Location.parse(outer)) is within


@pytest.mark.parametrize(
    "text",
    [
        "s3://b-1/wh/vic?x",
        "s3://b-1/wh/t#",
        "s3://b-1/wh//victim",
        "s3://b-1/wh/./t",
        "s3://b-1/wh/../t",
        "s3://b-1/wh/%2e%2e/t",
        "s3://b-1/wh/a%2Fb",
        "s3://b-1/wh\\t",
        "s3://b-1/wh/t\x00",
        "s3://b-1/wh/t\n",
        "s3://user@b-1/wh",
        "s3://b-1:9000/wh",
        "s3:/b-1/wh",
        "s3://B-1/wh",
        "file://host/etc/passwd",
        "file:relative/path",
        "file:///etc/../passwd",
        "gs://b-1/wh",
        "/etc/passwd",
        "",
        "s3://b-1/" + "k" * 1025,
    ],
)
def test_refused(text):
    with pytest.raises(InvalidLocation):
        Location.parse(text)


def test_spellings_of_one_object_are_one_location():
    assert Location.parse("s3a://b-1/wh/t/") == Location.parse("s3://b-1/wh/t") == Location.parse("S3N://b-1/wh/t")
    assert Location.parse("file:/data/t") == Location.parse("file:///data/t/")


def test_a_root_is_not_a_place_for_a_table():
    root = Location.parse("s3://b-1/wh/")
    assert not is_allowed(root, [root])
    assert is_allowed(root.child("ns", "t"), [root])
    with pytest.raises(InvalidLocation):
        root.child("..", "x")


def test_a_tables_files_are_those_strictly_under_its_location_or_metadata_directory():
    from app.ground.locations import ForeignFile, TableFiles

    files = TableFiles.of("s3://warehouse-bucket/root/db/t-1", "s3://warehouse-bucket/root/db/t-1/metadata")
    assert files.roots == (Location.parse("s3://warehouse-bucket/root/db/t-1"),)  # one inside the other: one
    assert files.owns("s3a://warehouse-bucket/root/db/t-1/data/x.parquet")  # any S3 spelling
    for foreign in (
        "s3://warehouse-bucket/root/db/t-1",  # the root itself
        "s3://warehouse-bucket/root/db/t-10/data/x.parquet",  # a sibling sharing its prefix
        "s3://warehouse-bucket/root/db/t-1/../t-2/x.parquet",
        "s3://other-bucket/root/db/t-1/x.parquet",
        "file:///root/db/t-1/x.parquet",
        "",
        None,
    ):
        assert not files.owns(foreign), foreign
        with pytest.raises(ForeignFile):
            files.require(foreign, "data file")
    moved = TableFiles.of("s3://warehouse-bucket/root/db/t-1", "s3://warehouse-bucket/meta/t-1")
    assert moved.owns("s3://warehouse-bucket/meta/t-1/snap-1.avro") and not moved.owns("s3://warehouse-bucket/meta/x")
    refused = r"^Cannot plan the scan: the manifest list .* is outside the table's locations"
    with pytest.raises(ForeignFile, match=refused):
        moved.require("s3://warehouse-bucket/meta/x", "manifest list", "Cannot plan the scan")
