"""The values between the dispatcher and the handlers (app/edge/responses.py): what a handler
returns becomes the response sent; what it reads of the request comes as an ``HttpRequest``."""

from __future__ import annotations

import functools
import json

from app.edge.responses import JSON, HttpRequest, Rendered, no_content, render_result, takes


def _serialize(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_a_json_answer_is_serialised_with_its_status_and_headers() -> None:
    rendered = render_result(({"a": 1}, 201, {"Cache-Control": "private"}), _serialize)
    assert rendered == Rendered(201, b'{"a":1}', {"Content-Type": JSON, "Cache-Control": "private"})
    assert render_result({"b": [1]}, _serialize) == Rendered(200, b'{"b":[1]}', {"Content-Type": JSON})
    assert render_result((None, 200), _serialize) == Rendered(200, b"", {"Content-Type": JSON})


def test_a_rendered_answer_is_sent_as_it_is() -> None:
    answer = Rendered(304, b"", {"ETag": '"x"'})
    assert render_result(answer, _serialize) is answer
    assert no_content() == Rendered(204, b"", {})


def test_the_request_reads_headers_case_insensitively_and_the_query_in_order() -> None:
    http = HttpRequest(
        "POST",
        "/v1/wh/namespaces",
        b"a=1&b=%C3%A9&a=2&c=",
        {b"x-iceberg-access-delegation": [b"vended-credentials", b"remote-signing"]},
        b"{}",
    )
    assert http.header("X-Iceberg-Access-Delegation") == "vended-credentials"
    assert http.header_values("x-iceberg-access-delegation") == ["vended-credentials", "remote-signing"]
    assert http.header("Idempotency-Key") is None and http.header_values("Idempotency-Key") == []
    assert http.query_pairs() == [("a", "1"), ("b", "é"), ("a", "2"), ("c", "")]


def test_handlers_that_name_http_get_the_request_through_their_decorators() -> None:
    def plain(prefix: str) -> None: ...

    def reading(prefix: str, http: HttpRequest) -> None: ...

    @functools.wraps(plain)
    def wrapper(*args: object, http: HttpRequest, **kwargs: object) -> None: ...

    @functools.wraps(reading)
    def passing(*args: object, **kwargs: object) -> None: ...

    assert not takes(plain, "http") and not takes(None, "http")
    assert takes(reading, "http") and takes(wrapper, "http") and takes(passing, "http")
    assert not takes(reading, "services") and takes(plain, "prefix")
