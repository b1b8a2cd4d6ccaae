"""Typed at the edge (issue 34): the view, namespace and change-feed handlers take their body as
a model the dispatcher parses once, and the models read a body as the services need it."""

from __future__ import annotations

import inspect

import pytest

import handlers.events
import handlers.namespaces
import handlers.views
from app.edge.operations import body_model_of
from app.ground.errors import BadRequest
from app.rules.requests.events import QueryEventsRequest
from app.rules.requests.views import CommitViewRequest, RegisterViewRequest


@pytest.mark.parametrize("module", [handlers.views, handlers.namespaces, handlers.events])
def test_every_handler_with_a_body_takes_a_model(module) -> None:
    takers = [f for _, f in inspect.getmembers(module, inspect.isfunction) if "body" in inspect.signature(f).parameters]
    assert takers
    assert [f.__name__ for f in takers if body_model_of(f) is None] == []


@pytest.mark.parametrize(
    ("sent", "overwrite"), [(True, True), (False, False), ("true", False), (1, False), (None, False)]
)
def test_register_view_overwrites_only_when_the_body_says_true(sent, overwrite) -> None:
    body = {"name": "v", "metadata-location": "s3://b/v/metadata/00000-x.metadata.json"}
    if sent is not None:
        body["overwrite"] = sent
    request = RegisterViewRequest.from_body(body)
    assert (request.name, request.metadata_location, request.overwrite) == ("v", body["metadata-location"], overwrite)


def test_a_view_commit_keeps_what_was_sent_for_the_change_feed() -> None:
    updates = [{"action": "set-properties", "updates": {"a": "1"}}, {"action": "remove-properties", "removals": ["b"]}]
    request = CommitViewRequest.from_body({"updates": updates})
    assert [(u.index, u.kind, u.value) for u in request.updates] == [
        (0, "set-properties", {"a": "1"}),
        (1, "remove-properties", ["b"]),
    ]
    assert [u.sent for u in request.updates] == updates and request.requirements == ()


def test_a_malformed_view_update_is_refused_where_the_body_is_parsed() -> None:
    with pytest.raises(BadRequest, match=r"Invalid view update #0 \(set-location\)"):
        CommitViewRequest.from_body({"updates": [{"action": "set-location", "location": ""}]})


def test_query_events_reads_every_filter() -> None:
    request = QueryEventsRequest.model_validate(
        {
            "page-size": 5,
            "since-timestamp-ms": 1000,
            "operation-types": ["create-view"],
            "object-types": ["view"],
            "catalog-objects-by-name": [["db", "v"]],
            "catalog-objects-by-uuid": ["0f4c5f3e-7c1e-4e4f-9f55-3d6f2a1b9c10"],
        }
    )
    assert (request.page_size, request.since_timestamp_ms, request.continuation_token) == (5, 1000, None)
    assert request.operation_types == ("create-view",) and request.object_types == ("view",)
    assert request.catalog_objects_by_name == (("db", "v"),) and not request.custom_filters
