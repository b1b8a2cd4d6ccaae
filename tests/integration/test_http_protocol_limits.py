"""HTTP protocol limits over real sockets (gunicorn + uvicorn + GrowlerHttpProtocol).

Oversized request heads and too many headers are refused 431, heads and bodies that do not arrive
in time 408, malformed requests 400 - each with the Iceberg error body, quickly, the connection
closed, nothing written, and the server still serving. A raw socket says exactly what is sent.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.integration.bearer import BEARER
from tests.integration.conftest import Server, start_server, stop_server

HEAD_LIMIT = 8192
HEADER_COUNT_LIMIT = 30
DEADLINE_S = 1.0
# Only a hang guard (socket timeouts, and the upper bound of a deadline that fired): the 1 s
# deadline's timer does not run slower on a slow or busy machine, and 29 s more is beyond any
# scheduling delay; what it rules out is a connection held open until the client gives up.
QUICK_S = 30.0


@pytest.fixture(scope="module")
def limited(settings, app, tmp_path_factory) -> Iterator[Server]:
    """A server with small limits and one-second deadlines (one worker: each test's connection
    and the health check afterwards meet the same process)."""
    running = start_server(
        settings,
        tmp_path_factory.mktemp("limited"),
        {
            "GROWLER_MAX_HEADER_BYTES": str(HEAD_LIMIT),
            "GROWLER_MAX_HEADERS": str(HEADER_COUNT_LIMIT),
            "GROWLER_HEADER_TIMEOUT_S": str(DEADLINE_S),
            "GROWLER_BODY_TIMEOUT_S": str(DEADLINE_S),
            "GROWLER_WORKERS": "1",
        },
    )
    try:
        yield running
    finally:
        stop_server(running)


def connect(server: Server) -> socket.socket:
    parts = urlsplit(server.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=QUICK_S)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def closed_by_server(sock: socket.socket) -> bool:
    """The server closed its side: the next read ends (EOF, or a reset of what was still unread)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def assert_iceberg_error(status: int, headers: dict[str, str], body: bytes, expected: int) -> dict:
    assert status == expected, body
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == expected
    assert error["type"] == "BadRequestException"
    assert error["message"]
    return error


def assert_healthy(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz", timeout=QUICK_S).status_code == 200
    assert httpx.get(f"{server.url}/v1/config", timeout=QUICK_S).status_code == 200  # the app, authenticated


def auth_header(server: Server) -> bytes:
    return f"Authorization: Bearer {BEARER.token(server.url)}\r\n".encode()


def namespace_count(services) -> int:
    with psycopg.connect(services.database_url) as conn:
        return conn.execute("SELECT count(*) FROM namespace").fetchone()[0]


def test_a_64_mib_header_is_refused_after_the_default_bound(server):
    """The default server (64 KiB): the client keeps sending its 64 MiB header while the 431 comes back."""
    sock = connect(server)
    stop = threading.Event()
    sent = [0]  # MiB chunks the client got rid of (the server read them, or the kernel's buffers hold them)

    def send_forever() -> None:
        try:
            sock.sendall(b"GET /v1/config HTTP/1.1\r\nHost: growler\r\nX-Big: ")
            chunk = b"a" * (1024 * 1024)
            for _ in range(64):
                if stop.is_set():
                    return
                sock.sendall(chunk)
                sent[0] += 1
        except OSError:
            return  # the server closed

    sender = threading.Thread(target=send_forever, daemon=True)
    sender.start()
    try:
        status, headers, body = read_response(sock)
        answered_after = sent[0]
        error = assert_iceberg_error(status, headers, body, 431)
        assert "65536 bytes" in error["message"]
        # Refused after the bound, not after reading the whole header: the answer came while most
        # of the 64 MiB was still unsent (the socket buffers hold a few MiB at most). Counted in
        # bytes, not seconds, so a slow machine cannot fail it.
        assert answered_after < 32, answered_after
    finally:
        stop.set()
        sender.join(QUICK_S)
        sock.close()
    assert_healthy(server)


def test_a_head_within_the_default_bound_is_served(server):
    sock = connect(server)
    with sock:
        padding = b"X-Pad: " + b"p" * (60 * 1024) + b"\r\n"
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: growler\r\n" + padding + b"\r\n")
        status, _, body = read_response(sock)
    assert status == 200, body


def test_an_oversized_head_sent_at_once_gets_its_431(limited):
    sock = connect(limited)
    with sock:
        sock.sendall(b"GET /v1/config HTTP/1.1\r\nHost: growler\r\nX-Big: " + b"a" * (3 * HEAD_LIMIT) + b"\r\n\r\n")
        status, headers, body = read_response(sock)
        assert_iceberg_error(status, headers, body, 431)
        assert closed_by_server(sock)
    assert_healthy(limited)


def test_a_long_request_line_counts_toward_the_bound(limited):
    sock = connect(limited)
    with sock:
        sock.sendall(b"GET /v1/config?" + b"q" * (2 * HEAD_LIMIT) + b" HTTP/1.1\r\nHost: growler\r\n\r\n")
        status, headers, body = read_response(sock)
        assert_iceberg_error(status, headers, body, 431)
    assert_healthy(limited)


def test_too_many_headers_are_refused(limited):
    sock = connect(limited)
    with sock:
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(HEADER_COUNT_LIMIT + 1))
        sock.sendall(b"GET /v1/config HTTP/1.1\r\nHost: growler\r\n" + many + b"\r\n")
        status, headers, body = read_response(sock)
        error = assert_iceberg_error(status, headers, body, 431)
        assert f"More than {HEADER_COUNT_LIMIT}" in error["message"]
        assert closed_by_server(sock)
    assert_healthy(limited)


def test_a_pipelined_oversized_head_is_refused_after_the_first_answer(limited):
    """The second request's head begins inside the read that carried the first: counted all the same."""
    sock = connect(limited)
    with sock:
        first = b"GET /healthz HTTP/1.1\r\nHost: growler\r\n\r\n"
        second = b"GET /healthz HTTP/1.1\r\nHost: growler\r\nX-Big: " + b"a" * (2 * HEAD_LIMIT) + b"\r\n\r\n"
        sock.sendall(first + second)
        received = b""
        while chunk := sock.recv(65536):  # both answers, then the server's close
            received += chunk
    answers = received.split(b"HTTP/1.1 ")
    assert [answer[:3] for answer in answers[1:]] == [b"200", b"431"], received
    refusal = answers[2].partition(b"\r\n\r\n")[2]
    assert json.loads(refusal)["error"]["code"] == 431
    assert_healthy(limited)


def test_a_body_shorter_than_its_length_gets_408_and_nothing_is_written(limited, services, clean_catalog):
    sock = connect(limited)
    with sock:
        body = b'{"namespace": ["slow"]}'
        sock.sendall(
            b"POST /v1/namespaces HTTP/1.1\r\nHost: growler\r\nContent-Type: application/json\r\n"
            + auth_header(limited)
            + b"Content-Length: %d\r\n\r\n" % (len(body) + 10)
            + body
        )
        started = time.monotonic()
        status, headers, answer = read_response(sock)
        elapsed = time.monotonic() - started
        error = assert_iceberg_error(status, headers, answer, 408)
        assert "body" in error["message"]
        assert DEADLINE_S * 0.9 <= elapsed < QUICK_S
        assert closed_by_server(sock)
    assert namespace_count(services) == 0
    assert_healthy(limited)
    assert namespace_count(services) == 0


def test_a_chunked_body_that_stops_gets_408(limited, services, clean_catalog):
    sock = connect(limited)
    with sock:
        sock.sendall(
            b"POST /v1/namespaces HTTP/1.1\r\nHost: growler\r\nContent-Type: application/json\r\n"
            + auth_header(limited)
            + b"Transfer-Encoding: chunked\r\n\r\n"
            + b'17\r\n{"namespace": ["slow"]}\r\n'  # the last chunk never comes
        )
        status, headers, answer = read_response(sock)
        assert_iceberg_error(status, headers, answer, 408)
    assert namespace_count(services) == 0
    assert_healthy(limited)


def test_a_body_sent_in_time_is_served(limited, services, clean_catalog):
    """Within the deadline a body may come in pieces."""
    sock = connect(limited)
    with sock:
        body = b'{"namespace": ["on_time"]}'
        sock.sendall(
            b"POST /v1/namespaces HTTP/1.1\r\nHost: growler\r\nContent-Type: application/json\r\n"
            + auth_header(limited)
            + b"Content-Length: %d\r\n\r\n" % len(body)
            + body[:10]
        )
        sock.sendall(body[10:])
        status, _, answer = read_response(sock)
    assert status == 200, answer
    assert namespace_count(services) == 1


def test_a_head_that_stops_gets_408(limited):
    sock = connect(limited)
    with sock:
        sock.sendall(b"GET /v1/config HTTP/1.1\r\nHost: growler\r\n")  # no end of head
        started = time.monotonic()
        status, headers, body = read_response(sock)
        elapsed = time.monotonic() - started
        assert_iceberg_error(status, headers, body, 408)
        assert DEADLINE_S * 0.9 <= elapsed < QUICK_S
        assert closed_by_server(sock)
    assert_healthy(limited)


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(limited):
    sock = connect(limited)
    with sock:
        started = time.monotonic()
        assert sock.recv(65536) == b""
        assert DEADLINE_S * 0.9 <= time.monotonic() - started < QUICK_S


def test_keep_alive_requests_each_get_their_own_head_deadline(limited):
    """A connection older than the head deadline still serves its next request."""
    with httpx.Client(base_url=limited.url, timeout=QUICK_S) as client:
        assert client.get("/healthz").status_code == 200
        started = time.monotonic()
        while time.monotonic() - started < DEADLINE_S * 1.5:  # one connection, reused throughout
            assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /v1/config HTTP/9.9\r\nHost: growler\r\n\r\n",
        b"GET /v1/config HTTP/1.1\r\nBad Header Name: x\r\n\r\n",
        b"POST /v1/namespaces HTTP/1.1\r\nHost: growler\r\nContent-Length: nope\r\n\r\n",
        b"POST /v1/namespaces HTTP/1.1\r\nHost: growler\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_a_malformed_request_gets_400_with_the_iceberg_body(limited, request_bytes):
    sock = connect(limited)
    with sock:
        sock.sendall(request_bytes)
        status, headers, body = read_response(sock)
        assert_iceberg_error(status, headers, body, 400)
    assert_healthy(limited)


TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_!#$%&'*+.^`|~"
header_names = st.one_of(
    st.text(TOKEN_CHARS, min_size=1, max_size=40),
    st.sampled_from(["content-length", "transfer-encoding", "expect", "host", "connection", "x-request-id"]),
    st.text(st.characters(min_codepoint=0, max_codepoint=255, blacklist_characters="\r\n"), max_size=20),
)
header_values = st.one_of(
    st.text(st.characters(min_codepoint=0, max_codepoint=255, blacklist_characters="\r\n"), max_size=200),
    st.sampled_from(["0", "-1", "chunked", "100-continue", "close", "upgrade", "99999999999999999999"]),
    st.integers(min_value=0, max_value=3 * HEAD_LIMIT).map(lambda n: "v" * n),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(headers=st.lists(st.tuples(header_names, header_values), max_size=HEADER_COUNT_LIMIT + 10))
def test_no_headers_make_a_500(limited, headers):
    """Whatever the header names, values and count, the answer is a 2xx or a 4xx, never a 5xx or
    silence; every refusal carries the Iceberg error body."""
    sock = connect(limited)
    with sock:
        head = b"GET /v1/config HTTP/1.1\r\nHost: growler\r\n" + auth_header(limited)
        head += b"".join(f"{name}: {value}\r\n".encode("latin-1") for name, value in headers)
        try:
            sock.sendall(head + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the whole head was sent; the answer is read below
        status, response_headers, body = read_response(sock)
    event(f"status {status}")
    assert 200 <= status < 500, body
    if status >= 400:
        assert json.loads(body)["error"]["code"] == status
    assert httpx.get(f"{limited.url}/healthz", timeout=QUICK_S).status_code == 200
