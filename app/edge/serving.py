"""How a gunicorn worker serves: uvicorn, connections spread over the workers, a graceful drain.

**Spreading connections.** Gunicorn's workers share one listening socket. uvicorn's event loop
(libuv under uvloop, or asyncio's) accepts every connection waiting on it as soon as it wakes,
so a burst of connections - a load balancer or a connection pool opening its 16 keep-alive
connections at once - lands on whichever worker woke first. Measured with wrk's 16 connections on
two workers: all of them on one worker, half the machine idle, and a read workload at half its
throughput. Clients keep their connections, so the imbalance lasts as long as they do.

So each worker accepts one connection at a time, and only when it holds no more open connections
than any other worker in rotation (``AcceptShares``: one count per worker, in memory the master
shares with its workers). A worker that is not the least loaded leaves a waiting connection to
the others for ``patience_s`` and takes it itself only if it is still waiting then (the others
may be stuck); ties go to whichever worker accepts first. A worker enters the rotation when it
starts accepting and leaves it when it stops (a graceful stop, or its exit, seen by the master),
so a booting or draining worker is never waited for. And since clients keep their connections,
a worker holding two or more beyond the least loaded one closes connections after their response
until it no longer does (``HandBack``): a worker that joins later, after a recycle or a reload,
gets its share of the clients already connected.

**Draining.** uvicorn's shutdown stops accepting and then closes at once every connection whose
request it has not started reading. A connection accepted a moment earlier - nginx connects and
sends its request right away - is then reset, and nginx answers 502 (it never retries a POST). So:
stop accepting (the other workers take new connections from the shared socket), wait until every
accepted connection has a request in progress (bounded), then shut down as usual, which lets
in-flight requests finish. Stopping to accept takes the connections already queued on the socket
first: when the last worker of a stopping server closes it, the kernel would reset them (a 502
again, seen in a rolling restart under writers); after that, connecting is refused, which nginx
retries on the next server.

Requests are read by ``GrowlerHttpProtocol`` (app/edge/protocol.py): uvicorn's httptools protocol
with bounds on request heads and deadlines for heads and bodies.

Nothing here imports the app (only ``app.ground`` and the protocol): gunicorn's master loads this
module with its configuration.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import logging
import multiprocessing
import select
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from gunicorn.arbiter import Arbiter
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker

from app.edge.protocol import GrowlerHttpProtocol
from app.edge.recycling import MemoryGuard, ask_master_for_one_more

log = logging.getLogger("uvicorn.error")

OUT_OF_ROTATION = -1
# accept() errors after which asyncio's own server waits too: the process or the system is out of
# file descriptors or memory, and trying again at once would spin
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_EXHAUSTED_WAIT_S = 1.0
_UNEXPECTED_WAIT_S = 0.1  # any other error: logged, then accepting goes on without spinning
# How often a worker that is not the least loaded looks again while a connection waits: a worker
# that the others' new connections made the least loaded takes its turn within this.
_TURN_POLL_S = 0.001


class AcceptShares:
    """The open-connection count of each worker in rotation, in memory shared across fork.

    Made by the master (``gunicorn.conf.py``) before it forks; each worker writes only its own
    slot, so no lock is needed (a reader sees a count a moment old at worst, and the decision
    it feeds is a preference, never a refusal).
    """

    def __init__(self, slots: int = 64) -> None:
        self.counts = multiprocessing.RawArray(ctypes.c_int, [OUT_OF_ROTATION] * slots)
        # 1: the worker in that slot is handing over to a successor (app/edge/recycling.py)
        self.leaving = multiprocessing.RawArray(ctypes.c_byte, slots)
        # how many workers the master runs (its num_workers: gunicorn.conf.py's nworkers_changed), and
        # one more as soon as a worker asks for a successor (before the master has read its signal)
        self.target = multiprocessing.Value(ctypes.c_int, 0)

    def claim(self, taken: set[int]) -> int | None:
        """A slot for a worker about to be forked (out of rotation until it accepts); None: all
        slots are taken, and that worker accepts without looking at the others."""
        for slot in range(len(self.counts)):
            if slot not in taken:
                self.counts[slot] = OUT_OF_ROTATION
                self.leaving[slot] = 0
                return slot
        return None

    def publish(self, slot: int, open_connections: int) -> None:
        self.counts[slot] = open_connections

    def leave(self, slot: int) -> None:
        self.counts[slot] = OUT_OF_ROTATION

    def mark_leaving(self, slot: int) -> None:
        self.leaving[slot] = 1

    def is_leaving(self, slot: int) -> bool:
        return bool(self.leaving[slot])

    def stay(self, slot: int) -> None:
        self.leaving[slot] = 0

    def expect_one_more(self, configured: int) -> None:
        """A worker asks the master for a successor: count it now, so that the leaving worker
        never sees the old count less itself (and leaves without a successor) while the master
        has not yet read the signal; the master's own count, when it comes, is the same."""
        with self.target.get_lock():
            self.target.value = (self.target.value or configured) + 1

    def wanted(self, configured: int) -> int:
        """How many workers must serve once the leaving ones are gone: the master's count less the
        workers leaving (``configured`` until the master has said)."""
        return (self.target.value or configured) - sum(self.leaving[:])

    def serving_others(self, slot: int) -> int:
        """How many workers other than ``slot`` are in rotation and not handing over."""
        leaving = self.leaving[:]
        return sum(
            1
            for index, count in enumerate(self.counts[:])
            if index != slot and count != OUT_OF_ROTATION and not leaving[index]
        )

    def least_loaded(self, slot: int) -> bool:
        """Whether ``slot`` holds no more open connections than any other worker in rotation."""
        mine = self.counts[slot]
        return all(count == OUT_OF_ROTATION or count >= mine for count in self.counts[:])

    def surplus(self, slot: int) -> int:
        """How many open connections ``slot`` holds beyond the least loaded other worker in rotation."""
        others = [count for index, count in enumerate(self.counts[:]) if index != slot and count != OUT_OF_ROTATION]
        return self.counts[slot] - min(others) if others else 0


class CountedConnections(set):
    """uvicorn's set of open connections (``ServerState.connections``), publishing its size.

    Connections accepted but not yet handed to their protocol (``arriving``) count too, so a burst
    is spread before the first of its connections is made; connections told to close after their
    response (``closing``, by client address) no longer count, so a worker handing connections
    back hands back only as many as it should.
    """

    def __init__(self, publish: Callable[[int], None]) -> None:
        super().__init__()
        self.publish = publish
        self.arriving = 0
        self.closing: set[Any] = set()

    def add(self, connection: Any) -> None:
        super().add(connection)
        self.changed()

    def discard(self, connection: Any) -> None:
        super().discard(connection)
        self.closing.discard(getattr(connection, "client", None))
        self.changed()

    def close_after_response(self, client: Any) -> None:
        self.closing.add(client)
        self.changed()

    def changed(self) -> None:
        self.publish(len(self) + self.arriving - len(self.closing))

    def stop_publishing(self) -> None:
        """Out of rotation for good: a connection closing while the worker drains must not put it back."""
        self.publish = _ignore


def _ignore(_count: int) -> None:
    pass


class BalancedAcceptor:
    """Accepts from a listening socket shared with the other workers, one connection at a time
    and in turn with them; uvicorn closes it like one of its ``asyncio.Server`` objects."""

    def __init__(
        self,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        connections: CountedConnections,
        least_loaded: Callable[[], bool],
        patience_s: float,
        ssl: Any = None,
    ) -> None:
        self.sock = sock
        self.protocol_factory = protocol_factory
        self.connections = connections
        self.least_loaded = least_loaded
        self.patience_s = patience_s
        self.ssl = ssl
        self.arrivals: set[asyncio.Task[Any]] = set()
        self.closed = False
        self.fd = sock.fileno()
        self.waiting = select.poll()  # whether a connection still waits, without the event loop
        self.waiting.register(self.fd, select.POLLIN)
        sock.setblocking(False)
        self.loop = asyncio.get_running_loop()
        self.task = self.loop.create_task(self._accept_forever())

    def close(self) -> None:
        """Stop accepting, and close this worker's copy of the socket, as ``asyncio.Server.close`` does:
        a stopping worker is seen no longer listening while it drains. Once only: the descriptor's
        number may belong to a client's connection afterwards."""
        if self.closed:
            return
        self.closed = True
        self.task.cancel()
        self.loop.remove_reader(self.fd)
        self._take_queued()
        self.sock.close()

    def _take_queued(self) -> None:
        """Accept every connection already in the kernel's queue before the socket closes: when the
        last copy of a listening socket closes (the last worker of a stopping server), the kernel
        resets the connections still queued on it, whose clients (nginx) may have sent a POST on
        them already - a 502 that nginx does not retry. Taken here, they are served by the drain;
        a connection arriving after the socket closed is refused, and nginx tries the next server."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                log.error("accepting a queued connection before closing failed: %s", exc)
                return
            self._take(conn)

    async def wait_closed(self) -> None:
        try:
            await self.task
        except asyncio.CancelledError:
            pass

    async def _accept_forever(self) -> None:
        loop = self.loop
        while True:
            await self._readable(loop)
            await self._turn(loop)
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue  # another worker took it, or the client gave up
            except OSError as exc:  # logged, and accepting goes on (asyncio's own server does the same)
                wait_s = _EXHAUSTED_WAIT_S if exc.errno in _EXHAUSTED else _UNEXPECTED_WAIT_S
                log.error("accepting a connection failed, trying again in %.1f s: %s", wait_s, exc)
                await asyncio.sleep(wait_s)
                continue
            self._take(conn)

    def _take(self, conn: socket.socket) -> None:
        """Hand an accepted connection to its protocol (it counts as arriving until it is made)."""
        conn.setblocking(False)
        self.connections.arriving += 1
        self.connections.changed()
        arrival = self.loop.create_task(self.loop.connect_accepted_socket(self.protocol_factory, conn, ssl=self.ssl))
        self.arrivals.add(arrival)
        arrival.add_done_callback(functools.partial(self._arrived, conn))

    def _arrived(self, conn: socket.socket, arrival: asyncio.Task[Any]) -> None:
        self.arrivals.discard(arrival)
        self.connections.arriving -= 1
        self.connections.changed()
        if not arrival.cancelled() and arrival.exception() is not None:
            log.warning("a connection could not be set up: %s", arrival.exception())
            conn.close()

    async def _turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until this worker is the least loaded, or the waiting connection is gone (another worker
        took it), or it has waited ``patience_s`` for the others: then it tries to accept."""
        deadline = loop.time() + self.patience_s
        while not self.least_loaded() and loop.time() < deadline and self.waiting.poll(0):
            await asyncio.sleep(_TURN_POLL_S)

    async def _readable(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until a connection waits on the socket (it stays readable until one worker accepts it)."""
        ready = loop.create_future()
        loop.add_reader(self.fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)


class HandBack:
    """ASGI wrapper: a worker holding two or more connections beyond the least loaded worker closes
    connections after their response (``Connection: close``) until it no longer does.

    Accepting in turn spreads connections as they are opened; clients keep them, though, so a
    worker that joins later - a successor after a hand-over or a crash, or after a reload - would
    otherwise get nothing from clients already connected. The client opens a new connection for
    its next request, and the accept rule gives it to the least loaded worker. A response is
    never cut short: the connection closes after it, as HTTP/1.1 lets either side do. A connection
    told to close stops counting at once (``CountedConnections.closing``), so concurrent requests
    do not all decide to close theirs. A worker handing over to its successor (``leaving``) closes
    every connection after its response: its clients move to the workers that accept.
    """

    SURPLUS = 2  # one apart is as even as an odd number of connections allows

    def __init__(
        self,
        app: Any,
        surplus: Callable[[], int],
        connections: CountedConnections,
        leaving: Callable[[], bool] = lambda: False,
    ) -> None:
        self.app = app
        self.surplus = surplus
        self.connections = connections
        self.leaving = leaving

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        client = scope.get("client")
        if (
            scope["type"] != "http"
            or client is None
            or client in self.connections.closing
            or (self.surplus() < self.SURPLUS and not self.leaving())
        ):
            await self.app(scope, receive, send)
            return
        self.connections.close_after_response(client)

        async def send_closing(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, send_closing)


class GrowlerServer(Server):
    """uvicorn's server, with balanced accepts when it has a slot, the drain described above, and
    the memory guard's hand-over (app/edge/recycling.py): once its successor accepts, the worker
    stops accepting, answers what its clients still send with ``Connection: close`` until they
    have all gone (at most the keep-alive timeout, after which an idle connection would close
    anyway), and then shuts down as on a graceful stop."""

    DRAIN_S = 2.0

    def __init__(
        self,
        *args: Any,
        shares: AcceptShares | None,
        slot: int | None,
        patience_s: float,
        guard: MemoryGuard | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.shares, self.slot, self.patience_s, self.guard = shares, slot, patience_s, guard
        self.handing_over_since: float | None = None

    async def on_tick(self, counter: int) -> bool:
        """uvicorn's tick (10 a second), and the memory guard's hand-over."""
        if await super().on_tick(counter):
            return True
        if self.guard is None or not self.started:
            return False
        now = time.monotonic()
        if self.handing_over_since is None:
            if self.guard.hand_over_now():
                self.handing_over_since = now
                self.stop_accepting()
            return False
        waited = now - self.handing_over_since
        return not self.server_state.connections or waited > self.config.timeout_keep_alive

    def leaving(self) -> bool:
        return self.handing_over_since is not None

    def stop_accepting(self) -> None:
        """Out of the accept rotation for good; the other workers take every new connection."""
        for server in self.servers:
            server.close()
        if isinstance(self.server_state.connections, CountedConnections):
            self.server_state.connections.stop_publishing()
            self.shares.leave(self.slot)  # nobody waits for a worker that no longer accepts

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None or self.shares is None or self.slot is None:
            await super().startup(sockets)  # uvicorn's own accepting: outside gunicorn, or no slot
            return
        shares, slot = self.shares, self.slot
        connections = CountedConnections(functools.partial(shares.publish, slot))
        self.server_state.connections = connections
        await super().startup(sockets=[])  # the lifespan (the app's start-up), no listener
        if not self.started:
            return
        self.config.loaded_app = HandBack(
            self.config.loaded_app, functools.partial(shares.surplus, slot), connections, self.leaving
        )
        protocol_factory = functools.partial(
            self.config.http_protocol_class,
            config=self.config,
            server_state=self.server_state,
            app_state=self.lifespan.state,
        )
        connections.changed()  # in rotation from here on
        self.servers = [
            BalancedAcceptor(
                sock,
                protocol_factory,
                connections,
                functools.partial(shares.least_loaded, slot),
                self.patience_s,
                self.config.ssl,
            )
            for sock in sockets
        ]
        log.info("Accepting connections in turn with the other workers (slot %d)", slot)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.stop_accepting()
        deadline = time.monotonic() + self.DRAIN_S
        connections = self.server_state.connections
        while time.monotonic() < deadline and (
            getattr(connections, "arriving", 0)
            or any(getattr(connection, "cycle", None) is None for connection in connections)
        ):
            await asyncio.sleep(0.02)
        await super().shutdown(sockets)


class GrowlerWorker(UvicornWorker):
    """uvicorn_worker.UvicornWorker (0.4, pinned) serving with ``GrowlerServer`` and ``GrowlerHttpProtocol``.

    ``accept_shares``, ``accept_slot`` and ``succeeds`` are set by the master before the fork
    (``gunicorn.conf.py``'s ``pre_fork``); ``accept_patience_s`` and ``max_rss_mb`` are the class's
    settings.
    """

    CONFIG_KWARGS: dict[str, Any] = {"loop": "auto", "http": GrowlerHttpProtocol}

    accept_shares: AcceptShares | None = None
    accept_slot: int | None = None
    accept_patience_s = 0.01
    max_rss_mb = 0  # GROWLER_MAX_WORKER_RSS_MB (gunicorn.conf.py); 0: no memory guard
    succeeds = False  # started for a worker handing over (set by the master before the fork)

    def memory_guard(self) -> MemoryGuard | None:
        if self.max_rss_mb <= 0:
            return None
        shares, slot = self.accept_shares, self.accept_slot
        in_rotation = shares is not None and slot is not None
        return MemoryGuard(
            self.max_rss_mb,
            functools.partial(shares.wanted, self.cfg.workers) if in_rotation else lambda: self.cfg.workers,
            serving_others=functools.partial(shares.serving_others, slot) if in_rotation else None,
            mark_leaving=functools.partial(shares.mark_leaving, slot) if in_rotation else None,
            ask_successor=functools.partial(self.ask_successor, shares) if in_rotation else ask_master_for_one_more,
            successor=self.succeeds,
        )

    def ask_successor(self, shares: AcceptShares) -> None:
        shares.expect_one_more(self.cfg.workers)
        ask_master_for_one_more()

    async def _serve(self) -> None:
        self.config.app = self.wsgi
        server = GrowlerServer(
            config=self.config,
            shares=self.accept_shares,
            slot=self.accept_slot,
            patience_s=self.accept_patience_s,
            guard=self.memory_guard(),
        )
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
