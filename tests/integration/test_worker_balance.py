"""Connections are spread over gunicorn's workers (app/edge/serving.py), and none waits for a stuck one.

Which worker holds a connection is read from /proc (the worker's sockets against the kernel's
TCP table): no test knob in the server. The server runs with a patience of 5 s, so a connection
is only ever taken out of turn when a test makes it so (a stopped worker); everything else the
tests assert follows from the rule itself, whatever the scheduler does.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.proc_support import children, established_from, wait_for

WAIT_S = 30.0
CONNECTIONS = 16


def start_two_workers(settings, tmp_path, patience_ms: int) -> tuple[Server, int, list[int]]:
    """gunicorn with two workers, once both are in the rotation (readyz answers as soon as one
    serves); its port and the workers' pids, lowest first."""
    server = start_server(settings, tmp_path, {"GROWLER_WORKERS": "2", "GROWLER_ACCEPT_PATIENCE_MS": str(patience_ms)})
    try:
        wait_for(lambda: server.log().count("Accepting connections in turn") == 2, "both workers to accept")
    except AssertionError:
        stop_server(server)
        raise
    return server, int(server.url.rsplit(":", 1)[1]), sorted(children(server.process.pid))


@pytest.fixture
def balanced(settings, app, tmp_path) -> Iterator[tuple[Server, int, list[int]]]:
    server, port, workers = start_two_workers(settings, tmp_path, 5000)
    try:
        yield server, port, workers
    finally:
        stop_server(server)


def held(port: int, workers: list[int]) -> list[int]:
    return [established_from(port, pid) for pid in workers]


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)


def test_connections_opened_one_after_another_alternate_between_the_workers(balanced):
    server, port, workers = balanced
    opened: list[socket.socket] = []
    try:
        for n in range(1, CONNECTIONS + 1):
            opened.append(connect(port))
            wait_for(lambda n=n: sum(held(port, workers)) == n, f"connection {n} to be accepted")
            counts = held(port, workers)
            # only a worker holding no more than the other may take it: they never differ by more than one
            assert max(counts) - min(counts) <= 1, counts
        assert held(port, workers) == [CONNECTIONS // 2, CONNECTIONS // 2]
    finally:
        for conn in opened:
            conn.close()


def test_a_burst_of_connections_is_spread_evenly(balanced):
    server, port, workers = balanced
    start = threading.Barrier(CONNECTIONS)
    opened: list[socket.socket] = []

    def open_one() -> None:
        start.wait(WAIT_S)
        opened.append(connect(port))

    threads = [threading.Thread(target=open_one) for _ in range(CONNECTIONS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S)
        assert len(opened) == CONNECTIONS
        wait_for(lambda: sum(held(port, workers)) == CONNECTIONS, "every connection to be accepted")
        counts = held(port, workers)
        assert max(counts) - min(counts) <= 1, counts  # a tie taken by both at once: one apart at most
    finally:
        for conn in opened:
            conn.close()


def test_a_stopped_worker_is_waited_for_only_its_patience(settings, app, tmp_path):
    server, port, workers = start_two_workers(settings, tmp_path, 200)
    opened: list[socket.socket] = []
    stopped = None
    try:
        for n in (1, 2):
            opened.append(connect(port))
            wait_for(lambda n=n: sum(held(port, workers)) == n, f"connection {n} to be accepted")
        assert held(port, workers) == [1, 1]
        stopped, running = workers
        os.kill(stopped, signal.SIGSTOP)
        # the running worker is not the least loaded after the first of these: it takes the others
        # once its patience is over, since the stopped worker never will
        for n in (3, 4, 5):
            opened.append(connect(port))
            wait_for(lambda n=n: established_from(port, running) == n - 1, f"connection {n} to be accepted")
        assert established_from(port, stopped) == 1
        # and it still answers, on a connection it was not the first choice for
        opened[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: growler\r\n\r\n")
        assert opened[-1].recv(4096).startswith(b"HTTP/1.1 200 OK")
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        for conn in opened:
            conn.close()
        stop_server(server)


def test_a_worker_that_joins_later_is_handed_connections(settings, app, tmp_path):
    server, port, workers = start_two_workers(settings, tmp_path, 200)
    opened: list[socket.socket] = []
    try:
        busy, late = workers
        os.kill(late, signal.SIGSTOP)  # in rotation, but it takes nothing: the busy worker gets all four
        try:
            for n in range(1, 5):
                opened.append(connect(port))
                wait_for(lambda n=n: established_from(port, busy) == n, f"connection {n} to be accepted")
        finally:
            os.kill(late, signal.SIGCONT)
        assert held(port, workers) == [4, 0]

        answers = []
        for n, conn in enumerate(list(opened)):
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: growler\r\n\r\n")
            head = conn.recv(4096)
            assert head.startswith(b"HTTP/1.1 200 OK"), head
            closing = b"connection: close" in head.lower()
            answers.append(closing)
            if closing:  # the client connects again, and the late worker accepts it
                while conn.recv(4096):  # the rest of the answer, then the server's close (recv blocks)
                    pass
                conn.close()
                expected = established_from(port, late) + 1
                opened[n] = connect(port)
                wait_for(lambda e=expected: established_from(port, late) == e, "the late worker to accept")
        # 4 against 0, then 3 against 1: two handed back; at 2 against 2 the busy worker keeps the rest
        assert answers == [True, True, False, False]
        assert established_from(port, busy) == 2 and established_from(port, late) == 2
    finally:
        for conn in opened:
            conn.close()
        stop_server(server)
