"""A webhook receiver for Growler's change feed that verifies signatures (docs/events.md).

Growler POSTs each event as a structured CloudEvent (``application/cloudevents+json``) with
``X-Growler-Signature: sha256=<hex>``, the HMAC-SHA256 of the body with the sink's secret. Answer
2xx once the event is safely handled: anything else (or no answer within 5 s) is retried with
backoff, so handle an event id seen before as a duplicate.

    GROWLER_WEBHOOK_SECRET=... python examples/webhook_receiver.py 8765
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def verified(secret: str, body: bytes, header: str | None) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return header is not None and hmac.compare_digest(expected, header)


class Receiver(BaseHTTPRequestHandler):
    secret = os.environ.get("GROWLER_WEBHOOK_SECRET", "")
    seen: set[str] = set()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if not verified(self.secret, body, self.headers.get("X-Growler-Signature")):
            self.send_response(401)
            self.end_headers()
            return
        event = json.loads(body)
        if event["id"] not in self.seen:  # at least once: a redelivery has the same id
            self.seen.add(event["id"])
            operation = event["data"]["operation"]
            print(event["sequence"], operation["operation-type"], event.get("subject", ""), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
