"""Commit requirements: each of the spec's eight holds or fails with a 409 in Java's wording (``UpdateRequirement``)."""

from __future__ import annotations

import json

import pytest
from table_metadata_builders import (
    OTHER_UUID,
    TABLE_UUID,
    add_snapshot,
    apply,
    as_json,
    commit,
    new_table,
    set_ref,
    snapshot,
    table_with_history,
)

from app.ground.errors import BadRequest, CommitFailed, NoSuchTable
from app.rules import table as tm
from app.rules.requests.tables import CommitTableRequest
from app.rules.table.requirements import refute_with_document


def check(base: tm.TableMetadata | None, *requirements: dict) -> None:
    tm.check_requirements(base, tm.parse_requirements(list(requirements)))


def failure(base: tm.TableMetadata | None, *requirements: dict) -> str:
    with pytest.raises(CommitFailed) as info:
        check(base, *requirements)
    assert info.value.code == 409
    assert info.value.message.startswith("Requirement failed")
    return info.value.message


# -- assert-create --------------------------------------------------------------------------


def test_assert_create_holds_when_the_table_does_not_exist():
    check(None, {"type": "assert-create"})


def test_assert_create_fails_when_the_table_exists():
    assert failure(new_table(), {"type": "assert-create"}) == "Requirement failed: table already exists"


# -- assert-table-uuid ----------------------------------------------------------------------


def test_assert_table_uuid_holds_for_the_same_uuid():
    check(new_table(), {"type": "assert-table-uuid", "uuid": TABLE_UUID})


def test_assert_table_uuid_fails_for_another_table():
    message = failure(new_table(), {"type": "assert-table-uuid", "uuid": OTHER_UUID})
    assert message == f"Requirement failed: UUID does not match: expected {TABLE_UUID} != {OTHER_UUID}"


# -- assert-ref-snapshot-id -----------------------------------------------------------------


def test_assert_ref_snapshot_id_holds_when_the_branch_is_unchanged():
    check(table_with_history(), {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 3})


def test_assert_ref_snapshot_id_fails_when_the_branch_moved():
    message = failure(table_with_history(), {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 2})
    assert message == "Requirement failed: branch main has changed: expected id 2 != 3"


def test_assert_ref_snapshot_id_names_a_tag_as_a_tag():
    metadata = apply(table_with_history(), set_ref("v1", 1, "tag"))
    message = failure(metadata, {"type": "assert-ref-snapshot-id", "ref": "v1", "snapshot-id": 3})
    assert message == "Requirement failed: tag v1 has changed: expected id 3 != 1"


def test_assert_ref_snapshot_id_null_holds_when_the_ref_does_not_exist():
    check(table_with_history(), {"type": "assert-ref-snapshot-id", "ref": "audit", "snapshot-id": None})


def test_assert_ref_snapshot_id_null_holds_for_a_new_branch_of_an_empty_table():
    # PyIceberg's own check wrongly fails here (no snapshots and a ref other than main).
    check(new_table(), {"type": "assert-ref-snapshot-id", "ref": "audit", "snapshot-id": None})


def test_assert_ref_snapshot_id_null_fails_when_the_ref_was_created_concurrently():
    message = failure(table_with_history(), {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None})
    assert message == "Requirement failed: branch main was created concurrently"


def test_assert_ref_snapshot_id_fails_when_the_ref_is_missing():
    message = failure(table_with_history(), {"type": "assert-ref-snapshot-id", "ref": "dev", "snapshot-id": 2})
    assert message == "Requirement failed: branch or tag dev is missing, expected 2"


def test_assert_ref_snapshot_id_sees_a_removed_ref_as_missing():
    metadata = apply(table_with_history(), {"action": "remove-snapshot-ref", "ref-name": "main"})
    assert "main is missing" in failure(metadata, {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 3})


# -- the id requirements --------------------------------------------------------------------


def evolved() -> tm.TableMetadata:
    """A table whose current schema (1), last column (12), spec (1, last 1002) and order (2) moved."""
    metadata = new_table()
    extra_column = {"id": 12, "name": "note", "type": "string", "required": False}
    schema_json = {
        "type": "struct",
        "schema-id": 99,
        "identifier-field-ids": [1],
        "fields": [*[field.model_dump(mode="json") for field in metadata.schema().fields], extra_column],
    }
    return apply(
        metadata,
        {"action": "add-schema", "schema": schema_json},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"fields": [{"source-id": 12, "transform": "identity", "name": "note"}]}},
        {"action": "set-default-spec", "spec-id": -1},
        {
            "action": "add-sort-order",
            "sort-order": {
                "order-id": 1,
                "fields": [{"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}],
            },
        },
        {"action": "set-default-sort-order", "sort-order-id": -1},
    )


def test_evolved_fixture_moved_every_id():
    metadata = evolved()
    assert (metadata.current_schema_id, metadata.last_column_id) == (1, 12)
    assert (metadata.default_spec_id, metadata.last_partition_id) == (1, 1002)
    assert metadata.default_sort_order_id == 2


@pytest.mark.parametrize(
    "requirement, field, current",
    [
        ("assert-last-assigned-field-id", "last-assigned-field-id", 12),
        ("assert-current-schema-id", "current-schema-id", 1),
        ("assert-last-assigned-partition-id", "last-assigned-partition-id", 1002),
        ("assert-default-spec-id", "default-spec-id", 1),
        ("assert-default-sort-order-id", "default-sort-order-id", 2),
    ],
)
def test_id_requirements_hold_for_the_current_value(requirement, field, current):
    check(evolved(), {"type": requirement, field: current})


@pytest.mark.parametrize(
    "requirement, field, stale, current, wording",
    [
        ("assert-last-assigned-field-id", "last-assigned-field-id", 11, 12, "last assigned field id changed"),
        ("assert-current-schema-id", "current-schema-id", 0, 1, "current schema changed"),
        (
            "assert-last-assigned-partition-id",
            "last-assigned-partition-id",
            1001,
            1002,
            "last assigned partition id changed",
        ),
        ("assert-default-spec-id", "default-spec-id", 0, 1, "default partition spec changed"),
        ("assert-default-sort-order-id", "default-sort-order-id", 1, 2, "default sort order changed"),
    ],
)
def test_id_requirements_fail_naming_expected_and_found(requirement, field, stale, current, wording):
    message = failure(evolved(), {"type": requirement, field: stale})
    assert message == f"Requirement failed: {wording}: expected id {stale} != {current}"


# -- against a table that does not exist ----------------------------------------------------


@pytest.mark.parametrize(
    "requirement",
    [
        {"type": "assert-table-uuid", "uuid": TABLE_UUID},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 0},
        {"type": "assert-current-schema-id", "current-schema-id": 0},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 999},
        {"type": "assert-default-spec-id", "default-spec-id": 0},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 0},
    ],
)
def test_every_other_requirement_fails_against_a_missing_table(requirement):
    message = failure(None, {"type": "assert-create"}, requirement)
    assert "table does not exist" in message
    assert requirement["type"] in message


def test_commit_to_a_missing_table_without_assert_create_is_no_such_table():
    with pytest.raises(NoSuchTable):
        commit(None, [], [{"action": "set-properties", "updates": {"a": "b"}}], base_location=None, now_ms=1)


def test_a_failed_requirement_applies_nothing():
    base = table_with_history()
    with pytest.raises(CommitFailed):
        commit(
            base,
            [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 2}],
            [add_snapshot(snapshot(4, parent=3, sequence_number=4)), set_ref("main", 4)],
            base_location=None,
            now_ms=1,
        )
    assert base.current_snapshot_id == 3 and base.snapshot_by_id(4) is None


def test_requirements_are_checked_against_the_base_not_the_updated_table():
    # The default sort order moves back to 1 in this very commit; the requirement is about the base (2).
    metadata = apply(
        evolved(),
        {"action": "set-default-sort-order", "sort-order-id": 1},
        requirements=[{"type": "assert-default-sort-order-id", "default-sort-order-id": 2}],
    )
    assert metadata.default_sort_order_id == 1


# -- parsing --------------------------------------------------------------------------------


def test_parse_requirements_returns_pyiceberg_models():
    parsed = tm.parse_requirements([{"type": "assert-current-schema-id", "current-schema-id": 3}])
    assert parsed[0].current_schema_id == 3


@pytest.mark.parametrize(
    "raw, wording",
    [
        ({"type": "assert-nothing"}, "assert-nothing"),
        ({"type": "assert-current-schema-id"}, "current-schema-id"),
        ({"type": "assert-current-schema-id", "current-schema-id": "one"}, "current-schema-id"),
        ({"type": "assert-table-uuid", "uuid": "not-a-uuid"}, "uuid"),
        ({"ref": "main"}, "type"),
        ("assert-create", "expected an object"),
    ],
)
def test_bad_requirements_are_bad_requests(raw, wording):
    with pytest.raises(BadRequest) as info:
        tm.parse_requirements([raw])
    assert info.value.code == 400
    assert wording in info.value.message


# -- the same checks on the decoded document, before the parse (refute_with_document) --------


def _outcome(check, base, requirements) -> str | None:
    try:
        check(base, requirements)
    except CommitFailed as exc:
        return exc.message
    return None


def _documents() -> list[tuple[str, dict]]:
    history = as_json(table_with_history())
    without_main = {**history, "refs": {k: v for k, v in history["refs"].items() if k != "main"}}
    return [
        ("new", as_json(new_table())),
        ("evolved", as_json(evolved())),
        ("history", history),
        ("tagged", as_json(apply(table_with_history(), set_ref("release", 1, "tag")))),
        ("main only implied", without_main),  # the model makes main from current-snapshot-id
        ("v3", as_json(new_table(format_version=3))),
    ]


_REQUIREMENTS = [
    {"type": "assert-table-uuid", "uuid": TABLE_UUID},
    {"type": "assert-table-uuid", "uuid": OTHER_UUID},
    {"type": "assert-table-uuid", "uuid": TABLE_UUID.upper()},
    *(
        {"type": "assert-ref-snapshot-id", "ref": ref, "snapshot-id": i}
        for ref in ("main", "release", "b")
        for i in (None, 1, 2, 3)
    ),
    *(
        {"type": kind, field: value}
        for kind, field in [
            ("assert-last-assigned-field-id", "last-assigned-field-id"),
            ("assert-current-schema-id", "current-schema-id"),
            ("assert-last-assigned-partition-id", "last-assigned-partition-id"),
            ("assert-default-spec-id", "default-spec-id"),
            ("assert-default-sort-order-id", "default-sort-order-id"),
        ]
        for value in (0, 1, 2, 11, 12, 999, 1000, 1001, 1002)
    ),
]


@pytest.mark.parametrize("name, document", _documents(), ids=[name for name, _ in _documents()])
def test_the_decoded_document_refutes_exactly_what_the_parsed_model_does(name, document):
    parsed = tm.parse_metadata(json.dumps(document))
    failures = 0
    for raw in _REQUIREMENTS:
        requirements = tm.parse_requirements([raw])
        expected = _outcome(tm.check_requirements, parsed, requirements)
        assert _outcome(refute_with_document, document, requirements) == expected, raw
        failures += expected is not None
    assert failures > len(_REQUIREMENTS) // 2  # most of them do fail: the comparison is not vacuous


@pytest.mark.parametrize(
    "change",
    [
        {"format-version": 1},  # v1 documents: the model fills in what they may lack
        {"last-column-id": 12.0},  # a type the model would coerce
        {"refs": {"main": {"snapshot-id": 1, "type": "BRANCH"}}},
        {"table-uuid": "not a uuid"},
        {"current-schema-id": None},
    ],
)
def test_a_document_the_model_would_read_differently_decides_nothing(change):
    document = {**as_json(evolved()), **change}
    refute_with_document(
        document, tm.parse_requirements([{"type": "assert-current-schema-id", "current-schema-id": 7}])
    )


def test_the_screen_refuses_what_commit_would_and_malformed_changes_come_first():
    document = as_json(evolved())
    requirements = [{"type": "assert-current-schema-id", "current-schema-id": 7}]
    with pytest.raises(BadRequest):  # refused as the request is parsed: before any screen runs
        CommitTableRequest.from_body({"requirements": requirements, "updates": [{"action": "nope"}]})
    with pytest.raises(CommitFailed, match="current schema changed: expected id 7 != 1"):
        tm.screen_for(tm.parse_requirements(requirements))(document)
