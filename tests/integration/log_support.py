"""Reading Growler's JSON log lines (request and commit events) out of a test server's log."""

from __future__ import annotations

import json
import time


def json_lines(server, **match) -> list[dict]:
    """The JSON log lines whose fields equal ``match``, waiting up to 30 s for at least one.

    A request's line is written just after its response is sent, so it may lag the response. The
    30 s only stop a wait for a line that never comes: a found line returns at once, and a slow or
    busy machine cannot run out of them.
    """
    deadline = time.monotonic() + 30
    while True:
        found = []
        for line in server.log().splitlines():
            if line.startswith("{"):
                doc = json.loads(line)
                if all(doc.get(key) == value for key, value in match.items()):
                    found.append(doc)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
