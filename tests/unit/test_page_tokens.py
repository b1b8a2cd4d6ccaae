"""Page tokens (app/ground/page_tokens.py): nothing readable, nothing forgeable, bound to a listing."""

from __future__ import annotations

import base64

import pytest

from app.ground.errors import BadRequest
from app.ground.page_tokens import KEY_BYTES, PAD_BYTES, PageTokens, new_key, scope

LISTING = scope("listTables", "wh", ["a"])


def _unpadded_b64decode(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


@pytest.mark.parametrize("key", [["a"], ["a", "b"], "table_name", ["ünï", "çødé"], "x" * 255])
def test_round_trip(key):
    tokens = PageTokens(new_key())
    token = tokens.seal(LISTING, key)
    assert "=" not in token and token.isascii()
    assert tokens.open(LISTING, token) == key


def test_a_token_reads_as_noise():
    tokens = PageTokens(new_key())
    token = tokens.seal(LISTING, ["secret_ns", "hidden_table"])
    raw = _unpadded_b64decode(token)
    for text in (token.encode(), raw, raw.lower()):
        assert b"secret" not in text and b"hidden" not in text
    # deterministic (SIV): the same place of the same listing, the same token (both answer paths agree)
    assert tokens.seal(LISTING, "hidden_table") == tokens.seal(LISTING, "hidden_table")


def test_names_of_any_length_below_the_padding_give_tokens_of_one_length():
    tokens = PageTokens(new_key())
    lengths = {len(tokens.seal(LISTING, "x" * size)) for size in (1, 10, 60, PAD_BYTES - 3)}
    assert len(lengths) == 1


def test_tampered_tokens_are_refused():
    tokens = PageTokens(new_key())
    token = tokens.seal(LISTING, "t1")
    raw = bytearray(_unpadded_b64decode(token))
    for position in (0, 1, 16, 17, len(raw) // 2, len(raw) - 1):  # version, tag, ciphertext
        altered = bytearray(raw)
        altered[position] ^= 0x01
        forged = base64.urlsafe_b64encode(bytes(altered)).decode().rstrip("=")
        with pytest.raises(BadRequest, match="Invalid pageToken"):
            tokens.open(LISTING, forged)
    with pytest.raises(BadRequest, match="Invalid pageToken"):
        tokens.open(LISTING, token[:-4])  # truncated


@pytest.mark.parametrize(
    "token",
    ["***", "", "e30", "WzFd", "bnVsbA", "W10", base64.urlsafe_b64encode(b'"t1"').decode(), "AQ" * 40],
)
def test_tokens_not_sealed_by_us_are_refused(token):
    """Among them, the old format: base64 JSON of the last key (a client may still hold one)."""
    with pytest.raises(BadRequest, match="Invalid pageToken"):
        PageTokens(new_key()).open(LISTING, token)


def test_a_token_of_another_key_is_refused():
    token = PageTokens(new_key()).seal(LISTING, "t1")
    with pytest.raises(BadRequest, match="Invalid pageToken"):
        PageTokens(new_key()).open(LISTING, token)


def test_a_token_is_read_by_every_holder_of_the_key():
    """Workers and replicas each build their own PageTokens from the one stored key."""
    key = new_key()
    assert PageTokens(key).open(LISTING, PageTokens(key).seal(LISTING, ["a", "b"])) == ["a", "b"]


@pytest.mark.parametrize(
    "other",
    [
        scope("listTables", "wh", ["b"]),  # another namespace
        scope("listViews", "wh", ["a"]),  # another listing of the same namespace
        scope("listTables", "other", ["a"]),  # another warehouse
        scope("listTables", "wh", ["a", "b"]),
        scope("listNamespaces", "wh", None),
    ],
)
def test_a_token_of_one_listing_is_refused_by_another(other):
    tokens = PageTokens(new_key())
    with pytest.raises(BadRequest, match="Invalid pageToken"):
        tokens.open(other, tokens.seal(LISTING, "t1"))


def test_scopes_are_unambiguous():
    assert scope("listNamespaces", "wh", ["a.b"]) != scope("listNamespaces", "wh", ["a", "b"])
    assert scope("listNamespaces", "wh", None) != scope("listNamespaces", "wh", [])


def test_keys():
    assert len(new_key()) == KEY_BYTES and new_key() != new_key()
    with pytest.raises(ValueError):
        PageTokens(b"short")
    with pytest.raises(RuntimeError):  # not installed yet: start-up has not loaded it
        PageTokens().seal(LISTING, "t1")
    assert "***" in repr(PageTokens(new_key()))
