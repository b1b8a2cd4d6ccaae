"""A TCP proxy that holds chosen requests until the test lets them go: an outside service made
slow for real, with no test knob in the server."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

WAIT_S = 60.0


class HoldingProxy:
    """Forwards TCP to ``target``; while ``holding`` is set, each request starting with ``held``
    (``b"PUT "``, ``b"POST "``) waits for ``release``."""

    def __init__(self, target: str, held: bytes) -> None:
        self.held = held
        parts = urlsplit(target)
        self.target = (parts.hostname, parts.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.holding = False
        self.request_held = threading.Event()
        self.release = threading.Event()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if requests and self.holding and data.startswith(self.held):
                    self.request_held.set()
                    self.release.wait(WAIT_S)
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.closed = True
        self.release.set()
        self.listener.close()
