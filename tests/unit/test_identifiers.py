"""Namespace parsing, name checks and the page window (page tokens: test_page_tokens.py)."""

from __future__ import annotations

import pytest

from app.ground.errors import BadRequest
from app.rules.identifiers import (
    check_namespace,
    page_window,
    parse_namespace,
)


def test_parse_namespace_splits_on_unit_separator():
    assert parse_namespace("a\x1fb\x1fc", "%1F") == ("a", "b", "c")
    assert parse_namespace("single", "%1F") == ("single",)


def test_parse_namespace_accepts_advertised_separator_and_unit_separator():
    assert parse_namespace("a.b\x1fc", "%2E") == ("a", "b", "c")
    assert parse_namespace("a.b", ".") == ("a", "b")


@pytest.mark.parametrize("raw", ["", "a\x1f", "\x1fa", "a\x1f\x1fb", "a\x00", "x" * 256])
def test_parse_namespace_rejects_empty_and_control(raw):
    with pytest.raises(BadRequest):
        parse_namespace(raw, "%1F")


def test_check_namespace_rejects_separator_inside_level():
    with pytest.raises(BadRequest):
        check_namespace(["a.b"], ".")
    assert check_namespace(["a.b"], "\x1f") == ("a.b",)


def test_too_many_levels():
    with pytest.raises(BadRequest):
        check_namespace([f"l{i}" for i in range(17)])


def test_page_window():
    assert page_window(None, None, 100) == (False, None)
    assert page_window(None, 10, 100) == (False, None)
    assert page_window("", None, 100) == (True, 100)
    assert page_window("tok", 5, 100) == (True, 5)
    for bad in (0, -3, 101):
        with pytest.raises(BadRequest):
            page_window("", bad, 100)
