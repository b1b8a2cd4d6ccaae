"""uvicorn's httptools protocol with bounds on what a client may make the server read and wait for.

uvicorn (``http="auto"`` picks httptools when it is installed, as here) reads a request head of
any size - httptools gathers a header's value in memory until its end, so one 64 MB header was
buffered whole and answered 200 - and waits for a body shorter than its Content-Length for as long
as the client keeps the connection open. uvicorn's only knob for the head,
``h11_max_incomplete_event_size``, applies to its h11 protocol alone; h11 parses in Python and
would cost every request more than these checks do, and it has no deadlines either. So this
subclass of ``HttpToolsProtocol`` adds them, with ``HttpLimits`` (``GROWLER_MAX_HEADER_BYTES``,
``GROWLER_MAX_HEADERS``, ``GROWLER_HEADER_TIMEOUT_S``, ``GROWLER_BODY_TIMEOUT_S``):

- **Head size.** Bytes received while a request head is being read are counted as they arrive,
  before the parser sees them, so no more than ``max_head_bytes`` of a head is ever buffered; the
  request line and headers the parser hands over are counted too (exact for pipelined requests,
  whose heads begin inside a read). Past the bound, or past ``max_headers`` headers: 431.
- **Head deadline.** A connection's first request head must be complete within
  ``head_timeout_s`` of the connection opening, a later one within ``head_timeout_s`` of its first
  byte (uvicorn's keep-alive timeout bounds the wait before it): else 408 once a request began,
  or a quiet close when nothing was sent.
- **Body deadline.** A body must be complete within ``body_timeout_s`` of its head: else 408, the
  connection closed, and the app's ``receive`` reports the client gone, so the request is refused
  before any handler sees a body (``RequestGuardMiddleware``). Time the server itself held the
  client back (reading paused while an earlier pipelined request is answered, or ``Expect:
  100-continue`` not yet answered) does not count against the client: the deadline starts over.
- **Malformed requests** get uvicorn's 400, with the Iceberg error body.

Timers are armed only when a read ends with a head or a body incomplete, so a request that
arrives in one read (nearly all of them) costs a few comparisons and no timer.

Every refusal carries ``{"error": {"message", "type", "code"}}`` and ``Connection: close``, and
the connection is closed after it: what follows an unread head or body cannot be parsed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.ground.errors import error_body
from app.ground.settings import HttpLimits

log = logging.getLogger("uvicorn.error")

# Where the connection is in its current request: between requests, in a head, in a body; or
# refused, reading and dropping what the client still sends until it reads the answer.
_IDLE, _HEAD, _BODY, _REFUSED = 0, 1, 2, 3
# How long a refused connection stays open, its write side shut, dropping what arrives. Closing at
# once with unread bytes in the socket makes the kernel reset the connection, and a client still
# sending its oversized head would see the reset instead of the 431 (nginx's lingering close).
LINGER_S = 1.0


class _Refused(Exception):
    """Raised from a parser callback to stop parsing; ``refusal`` says what to answer."""


class GrowlerHttpProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with ``limits`` (set on the class by ``gunicorn.conf.py``)."""

    limits = HttpLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _IDLE
        self._received = 0  # bytes received while reading the current head (read by read)
        self._head_bytes = 0  # request line and headers of the current head, as parsed
        self._refusal: tuple[int, str] | None = None  # what a parser callback refused
        self._pending: tuple[int, str] | None = None  # a refusal waiting for earlier answers
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    # --- connection and reads ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.limits.head_timeout_s, self._head_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """uvicorn's, with the head's bytes counted before the parser buffers them."""
        self._unset_keepalive_if_required()
        if self._phase == _REFUSED:
            return
        if self._phase != _BODY:
            room = self.limits.max_head_bytes - self._received
            if len(data) > room:
                # Only what the bound allows goes to the parser; if the head ends within it,
                # the rest (its body, further requests) is read as usual.
                if not self._feed(data[: max(room, 0)]):
                    return
                if self._phase != _BODY:
                    self._refuse(431, f"Request line and headers larger than {self.limits.max_head_bytes} bytes")
                    return
                data = data[max(room, 0) :]
            else:
                self._received += len(data)
        if self._feed(data):
            self._arm_deadlines()

    def _feed(self, data: bytes) -> bool:
        """Parse ``data``; False when the connection was answered and closed."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        except httptools.HttpParserError:
            if self._refusal is not None:
                self._refuse(*self._refusal)
            else:
                log.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return False
        return not self.transport.is_closing()

    def _arm_deadlines(self) -> None:
        """A read ended inside a head or a body: its deadline runs (once armed, it stays)."""
        if self._phase == _HEAD and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.head_timeout_s, self._head_too_slow)
        elif self._phase == _BODY and self._body_timer is None and self.cycle is not None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_too_slow)

    # --- parser callbacks -------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._phase = _HEAD
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self.url += url  # uvicorn's, inlined (these callbacks run for every request)
        self._head_bytes += len(url)
        if self._head_bytes > self.limits.max_head_bytes:
            self._refusal = (431, f"Request line and headers larger than {self.limits.max_head_bytes} bytes")
            raise _Refused

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self._head_bytes > self.limits.max_head_bytes:
            self._refusal = (431, f"Request line and headers larger than {self.limits.max_head_bytes} bytes")
            raise _Refused
        if len(self.headers) >= self.limits.max_headers:
            self._refusal = (431, f"More than {self.limits.max_headers} request headers")
            raise _Refused
        name = name.lower()  # uvicorn's, inlined
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._phase = _BODY
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._phase = _IDLE
        self._received = 0
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # --- deadlines --------------------------------------------------------------------------------

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._phase == _IDLE:  # nothing of a request arrived: nobody to answer
            self.transport.close()
            return
        self._refuse(408, f"Request headers not received within {self.limits.head_timeout_s:g} s")

    def _body_too_slow(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self.flow.read_paused or cycle.waiting_for_100_continue:  # the server held the client back
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_too_slow)
            return
        self._refuse(408, f"Request body not received within {self.limits.body_timeout_s:g} s")

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None

    # --- answers ----------------------------------------------------------------------------------

    def _refuse(self, status: int, message: str, *, logged: bool = False) -> None:
        """Answer ``status`` with the Iceberg error body and close the connection.

        A refused head behind pipelined requests still being answered is answered after them, in
        order. A refused body whose request the app has already begun to answer (without reading
        the body) gets no second answer: the connection only closes. Either way the app's
        ``receive`` reports the client gone for a request it was still reading.
        """
        self._cancel_timers()
        if not logged:
            log.warning("Refused a request (%d): %s", status, message)
        cycle = self.cycle
        if self._phase == _BODY:
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.keep_alive = False
                cycle.message_event.set()
            if cycle is not None and cycle.response_started:
                self._phase = _REFUSED
                self.transport.close()
                return
        elif cycle is not None and not (cycle.response_complete and not self.pipeline):
            self._phase = _REFUSED
            self._pending = (status, message)  # answered in on_response_complete
            return
        self._answer_and_close(status, message)

    def _answer_and_close(self, status: int, message: str) -> None:
        self._phase = _REFUSED
        if self.transport.is_closing():
            return
        self.transport.write(self._error_response(status, message))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._head_timer = self.loop.call_later(LINGER_S, self.transport.close)

    def on_response_complete(self) -> None:
        if self._pending is None or self.pipeline:
            super().on_response_complete()
            return
        self.server_state.total_requests += 1
        status, message = self._pending
        self._pending = None
        self._answer_and_close(status, message)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request httptools cannot parse, with the Iceberg error body."""
        self._refuse(400, msg, logged=True)

    def _error_response(self, status: int, message: str) -> bytes:
        body = json.dumps(error_body(message, "BadRequestException", status)).encode()
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.append(name + b": " + value + b"\r\n")
        head.append(b"content-type: application/json\r\n")
        head.append(b"content-length: " + str(len(body)).encode("ascii") + b"\r\n")
        head.append(b"connection: close\r\n\r\n")
        return b"".join(head) + body
