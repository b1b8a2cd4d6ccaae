"""What verifying a token needs from PostgreSQL, held in memory and kept fresh by polling.

A request must not cost a database round trip for its token: each worker keeps the principals'
generations and deleted flags and the signing keys in memory, and a thread checks one counter
row (``auth_state.version``, bumped with every change) every ``poll_s`` (0.5 s), reloading only
when it moved. So a rotation, a deletion or a new signing key takes effect on every worker and
replica within about a second. Something a worker has not seen yet (a principal created or a key
added a moment ago) makes it reload at once, at most once per ``poll_s``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app.edge.auth.config import AuthSettings
from app.edge.auth.keys import KeyRing, new_key
from storage.principals import PrincipalRepository, PrincipalState

log = logging.getLogger(__name__)


class AuthState:
    def __init__(
        self,
        repository: PrincipalRepository,
        settings: AuthSettings,
        listeners: tuple[Callable[[], None], ...] = (),
    ) -> None:
        self.repository = repository
        self.settings = settings
        self.principals: dict[str, PrincipalState] = {}
        self.keys = KeyRing.empty()
        self.version: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_load = float("-inf")  # never loaded (the monotonic clock may be near 0 after boot)
        # Called after each reload that saw the version move: other caches that every management
        # change must drop (the warehouse directory's rows and routes), given at construction.
        self.listeners = listeners

    def start(self) -> None:
        """Make the first signing key if there is none (one worker wins), load, and start polling."""
        if self.settings.issues_tokens and not any(not row.retired for row in self.repository.signing_keys()):
            assert self.settings.key_password is not None
            self.repository.add_signing_key(
                new_key(self.settings.key_password), retire_after_s=self.settings.token_ttl_s, only_if_none=True
            )
        self.reload(force=True)
        if self._thread is None:
            self._thread = threading.Thread(target=self._poll, name="growler-auth-state", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def reload(self, force: bool = False) -> bool:
        """Read the version row; reload principals and keys when it moved (or ``force``)."""
        with self._lock:
            version = self.repository.version()  # first: a change after it is seen by the next poll
            if version == self.version and not force:
                return False
            moved = self.version is not None and version != self.version  # not the first load
            principals = self.repository.states()
            keys = KeyRing.load(self.repository.signing_keys(), self.settings.key_password, self.keys)
            self.principals, self.keys, self.version = principals, keys, version
            self._last_load = time.monotonic()
        for listener in self.listeners if moved else ():
            listener()
        return True

    def reload_if_due(self) -> bool:
        """For a principal or key not seen yet: reload now, unless that was done within ``poll_s``."""
        if time.monotonic() - self._last_load < self.settings.poll_s:
            return False
        return self.reload(force=True)

    def reload_when_due(self) -> bool:
        """For a principal named by a token whose signature verified (so Growler issued it): reload
        now, or when ``poll_s`` has passed since the last load if that was a moment ago - a
        principal created just after that load must still be found, not answered 401. Blocks for
        at most ``poll_s``; only tokens Growler signed get here, so nobody can make it wait at will.
        """
        wait = self.settings.poll_s - (time.monotonic() - self._last_load)
        if wait > 0:
            self._stop.wait(wait)
        return self.reload_if_due()

    def _poll(self) -> None:
        failing = False
        while not self._stop.wait(self.settings.poll_s):
            try:
                self.reload()
                if failing:
                    log.info("authentication state reachable again")
                failing = False
            except Exception as exc:  # noqa: BLE001 - keep the last known state and try again
                if not failing:
                    log.warning("cannot refresh authentication state (keeping the last one): %s", type(exc).__name__)
                failing = True
