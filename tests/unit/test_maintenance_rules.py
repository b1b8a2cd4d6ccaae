"""The pure maintenance rules (app/rules/maintenance.py): which policy applies, what an expiry
removes (Java's ExpireSnapshots retention), where the orphan floor lies, what files a run may delete."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.ground.locations import Location
from app.maintenance.files import Deletable
from app.rules import maintenance as rules
from app.rules.maintenance import DAY_MS, Attachment, EffectivePolicy, ExpirySettings, plan_expiry

EXPIRY = rules.SNAPSHOT_EXPIRY
NOW = 1_000 * DAY_MS


def snapshot(snapshot_id: int, parent: int | None, age_days: float):
    return SimpleNamespace(
        snapshot_id=snapshot_id, parent_snapshot_id=parent, timestamp_ms=NOW - int(age_days * DAY_MS)
    )


def ref(snapshot_id: int, kind: str = "branch", **overrides):
    fields = {"min_snapshots_to_keep": None, "max_snapshot_age_ms": None, "max_ref_age_ms": None, **overrides}
    return SimpleNamespace(snapshot_id=snapshot_id, snapshot_ref_type=SimpleNamespace(value=kind), **fields)


def metadata(snapshots, refs):
    return SimpleNamespace(snapshots=snapshots, refs=refs)


# a line of six daily snapshots, 1 the oldest (6 days) and 6 main's head (1 day)
LINE = [snapshot(i, i - 1 if i > 1 else None, 7 - i) for i in range(1, 7)]


def test_nearest_attachment_wins_per_type():
    attached = [
        Attachment(EXPIRY, "catalog", 0, {"enable": True}),
        Attachment(EXPIRY, "namespace", 1, {"enable": False}),
        Attachment(EXPIRY, "namespace", 2, {"enable": True, "config": {"min_snapshot_to_keep": 3}}),
        Attachment(EXPIRY, "warehouse", 0, {"enable": False}),
        Attachment(rules.ORPHAN_FILE_REMOVAL, "warehouse", 0, {"enable": True}),
    ]
    found = rules.effective(attached, {})
    assert found[EXPIRY].content["config"] == {"min_snapshot_to_keep": 3}
    assert found[EXPIRY].inherited_from == "namespace"
    assert found[rules.ORPHAN_FILE_REMOVAL].inherited_from == "warehouse"


def test_table_properties_sit_between_the_table_and_the_levels_above():
    properties = {"history.expire.min-snapshots-to-keep": "7"}
    above = [Attachment(EXPIRY, "namespace", 5, {"enable": False})]
    assert rules.effective(above, properties)[EXPIRY].inherited_from == "table-properties"
    own = [*above, Attachment(EXPIRY, "table", 0, {"enable": False})]
    assert rules.effective(own, properties)[EXPIRY].inherited_from == "table"
    assert rules.effective([], {}) == {}  # nothing attached, nothing set: nothing runs


def test_expiry_by_age_keeps_the_minimum_and_the_young():
    settings = ExpirySettings(max_snapshot_age_ms=3 * DAY_MS + 1, min_snapshots=1, max_ref_age_ms=None)
    plan = plan_expiry(metadata(LINE, {"main": ref(6)}), settings, NOW)
    assert plan.snapshot_ids == (1, 2, 3)  # 4, 5 and 6 are younger than 3 days
    assert plan.requirements("u")[1:] == [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 6}]


def test_expiry_by_count_keeps_that_many_however_old():
    settings = ExpirySettings(max_snapshot_age_ms=0, min_snapshots=2, max_ref_age_ms=None)
    assert plan_expiry(metadata(LINE, {"main": ref(6)}), settings, NOW).snapshot_ids == (1, 2, 3, 4)


def test_tags_and_branches_keep_what_the_policy_and_their_own_settings_say():
    refs = {
        "main": ref(6),
        "tag": ref(2, "tag"),  # keeps its snapshot
        "dev": ref(4, min_snapshots_to_keep=2),  # its own minimum: 4 and 3
        "stale": ref(1, "tag"),  # older than the policy's max ref age: goes
        "pinned": ref(1, "branch", max_ref_age_ms=100 * DAY_MS),  # its own max ref age keeps it
    }
    settings = ExpirySettings(max_snapshot_age_ms=0, min_snapshots=1, max_ref_age_ms=5 * DAY_MS)
    plan = plan_expiry(metadata(LINE, refs), settings, NOW)
    assert plan.refs_removed == ("stale",)
    assert plan.snapshot_ids == (5,)
    assert [r["ref"] for r in plan.requirements("u")[1:]] == sorted(refs)  # every ref it planned from
    assert plan.updates() == [
        {"action": "remove-snapshot-ref", "ref-name": "stale"},
        {"action": "remove-snapshots", "snapshot-ids": [5]},
    ]


def test_expiry_settings_from_polaris_config_and_properties():
    polaris = EffectivePolicy(
        EXPIRY,
        {"enable": True, "config": {"min_snapshot_to_keep": 3, "max_snapshot_age_days": "2", "max_ref_age_days": 9}},
        "warehouse",
    )
    assert ExpirySettings.of(polaris) == ExpirySettings(2 * DAY_MS, 3, 9 * DAY_MS)
    defaults = ExpirySettings.of(EffectivePolicy(EXPIRY, {"enable": True}, "catalog"))
    assert defaults == ExpirySettings(5 * DAY_MS, 1, None)  # Iceberg's defaults, only once enabled
    properties = rules.expiry_from_properties({"history.expire.max-snapshot-age-ms": "60000"})
    assert ExpirySettings.of(properties).max_snapshot_age_ms == 60000


def test_the_orphan_floor_is_three_days_by_default_and_never_below_one():
    default = EffectivePolicy(rules.ORPHAN_FILE_REMOVAL, {"enable": True}, "table")
    assert rules.orphan_cutoff_ms(default, NOW) == NOW - 3 * DAY_MS
    one = EffectivePolicy(rules.ORPHAN_FILE_REMOVAL, {"enable": True, "config": {"min_file_age_days": 1}}, "table")
    assert rules.orphan_cutoff_ms(one, NOW) == NOW - DAY_MS
    later = EffectivePolicy(rules.ORPHAN_FILE_REMOVAL, {"enable": True, "older_than": NOW / 1000}, "table")
    assert rules.orphan_cutoff_ms(later, NOW) == NOW - 3 * DAY_MS  # older_than never passes the floor
    with pytest.raises(rules.InvalidPolicy):
        rules.validate(rules.ORPHAN_FILE_REMOVAL, {"enable": True, "config": {"min_file_age_days": 0}})


def test_deletes_stay_strictly_under_the_table_and_out_of_other_owners():
    root = Location.parse("s3://bkt/wh/ns/t")
    allowed = Deletable(root, ["s3://bkt/wh/ns/t/nested-table"])
    assert allowed(Location.parse("s3://bkt/wh/ns/t/data/f.parquet"))
    assert not allowed(Location.parse("s3://bkt/wh/ns/t2/data/f.parquet"))  # a sibling sharing the text prefix
    assert not allowed(Location.parse("s3://bkt/wh/ns/t/nested-table/data/f.parquet"))
    assert not allowed(root)
    assert Deletable(root, ["s3://bkt/wh/ns"]).refused  # someone owns a place above the table: nothing goes
    assert not Deletable(root, ["s3://bkt/wh/ns"])(Location.parse("s3://bkt/wh/ns/t/data/f.parquet"))
