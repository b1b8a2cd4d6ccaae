"""The control-character check, once: for names (every control character) and request paths.

A request path legitimately carries 0x1F, the namespace separator (decoded from ``%1F``), so
the path check allows that one; a namespace level, table or view name allows none.
"""

from __future__ import annotations

import re

UNIT_SEPARATOR = "\x1f"
_IN_NAMES = re.compile(r"[\x00-\x1f\x7f]")
_IN_PATHS = re.compile(r"[\x00-\x1e\x7f]")


def has_control_characters(text: str) -> bool:
    """Any control character (C0 or DEL): not allowed in a name."""
    return _IN_NAMES.search(text) is not None


def path_has_control_characters(path: str) -> bool:
    """Any control character but the namespace separator: not allowed in a request path."""
    return _IN_PATHS.search(path) is not None
