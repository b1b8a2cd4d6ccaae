"""Page tokens a caller can neither read nor make: the last key of a page, sealed (pure, no I/O).

A listing's next-page token must lead on from the last row the page *fetched*, which may be a
name the caller may not see (the page is filtered after the fetch). Base64 JSON of that key
handed the hidden name to the caller, so the key is sealed with AES-SIV (RFC 5297, AES-256:
authenticated encryption from ``cryptography``): the token reads as noise, and one forged,
altered or made under another key fails its tag and is a 400 "Invalid pageToken".

SIV is deterministic: the same key of the same listing gives the same token. That is what lets
two paths answering one request (the event loop's and the handler's) answer the same bytes, and
there is no nonce to repeat however many tokens are made; it tells a caller only that two of its
tokens stand at the same place of the same listing, which the pages themselves tell.

The token is bound to the listing it pages (``scope``: the operation and its parent, e.g.
listTables of ``wh`` / ``a.b``) as associated data, so a token of one listing is refused by any
other. The plaintext is padded to a multiple of ``PAD_BYTES``: a sealed key's length does not
tell the length of a name (all names shorter than about 120 bytes give tokens of one length).

The key is the installation's, the same on every worker and replica and across restarts
(``storage/page_keys.py`` keeps it in PostgreSQL); ``install`` puts it here at start-up.
"""

from __future__ import annotations

import base64
import binascii
import json

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from app.ground.errors import BadRequest

VERSION = b"\x01"  # the token format; part of the associated data, so a change cannot be confused
KEY_BYTES = 64  # AES-256-SIV: two 256-bit keys (S2V and CTR)
TAG_BYTES = 16
PAD_BYTES = 128
PageKey = list[str] | str  # a namespace's path, or a name; the management API's grant ids as text


def new_key() -> bytes:
    return AESSIV.generate_key(bit_length=KEY_BYTES * 8)


def scope(operation: str, *parts: object) -> bytes:
    """What a token pages: the operation and the parts naming its parent (JSON: unambiguous)."""
    return json.dumps([operation, *parts], separators=(",", ":"), ensure_ascii=False).encode()


class PageTokens:
    """Seals and opens page tokens under one key (installed at start-up, or given)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._aead: AESSIV | None = None
        if key is not None:
            self.install(key)

    def __repr__(self) -> str:
        return "PageTokens(***)"

    def install(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a page token key has {KEY_BYTES} bytes")
        self._aead = AESSIV(key)

    def _cipher(self) -> AESSIV:
        if self._aead is None:  # start-up has not loaded the key: requests are still answered 503
            raise RuntimeError("the page token key is not loaded")
        return self._aead

    def seal(self, listing: bytes, last_key: PageKey) -> str:
        plain = json.dumps(last_key, separators=(",", ":"), ensure_ascii=False).encode()
        plain += b" " * (-len(plain) % PAD_BYTES)  # JSON ignores the trailing blanks
        sealed = VERSION + self._cipher().encrypt(plain, [VERSION, listing])
        return base64.urlsafe_b64encode(sealed).decode("ascii").rstrip("=")

    def open(self, listing: bytes, token: str) -> PageKey:
        """The key a token of ``listing`` carries; anything else (altered, forged, of another
        listing or key, not a token at all) is a 400 that says no more than that."""
        cipher = self._cipher()
        try:
            raw = base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode("ascii"))
            if raw[:1] != VERSION or len(raw) <= 1 + TAG_BYTES:
                raise ValueError("not a page token")
            value = json.loads(cipher.decrypt(raw[1:], [VERSION, listing]))
        except (ValueError, binascii.Error, UnicodeError, InvalidTag) as exc:
            raise BadRequest("Invalid pageToken") from exc
        if isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            return value
        raise BadRequest("Invalid pageToken")  # sealed by us, so never: a format change
