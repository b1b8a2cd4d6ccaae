"""The location model against the real S3 (SeaweedFS): the key the model derives from a
location's text is exactly the key the object store stores and lists back."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.ground.locations import InvalidLocation, Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_BUCKET

# Printable text of all kinds (spaces, punctuation, accents, CJK, emoji), and the separators;
# the characters the model refuses are covered by tests/unit/test_locations.py.
segment = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(list("/. -_")),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def store(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(segment, min_size=1, max_size=4))
def test_the_model_key_is_the_stored_key(store, parts):
    run = f"location-model-{uuid.uuid4().hex}"
    text = f"s3://{TEST_BUCKET}/{run}/" + "/".join(parts)
    try:
        location = Location.parse(text)
    except InvalidLocation:
        return
    root = Location.parse(f"s3://{TEST_BUCKET}/{run}")
    assert location.is_within(root) and location != root
    store.write_new(location, b"x")
    try:
        stored = [obj.object_name for obj in store.client.list_objects(TEST_BUCKET, prefix=f"{run}/", recursive=True)]
        assert stored == [location.key]  # what S3 stored, byte for byte
        assert list(store.list(root)) == [location]  # and the store lists it back as the same location
        assert store.read(Location.parse(location.uri)) == b"x"
    finally:
        store.delete([location])
    assert not store.exists(location)


def test_the_store_refuses_text(store):
    with pytest.raises(TypeError):
        store.read(f"s3://{TEST_BUCKET}/x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.delete([f"s3://{TEST_BUCKET}/x"])  # type: ignore[list-item]
