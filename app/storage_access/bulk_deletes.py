"""Whether a warehouse's storage may be trusted with signed bulk deletes: probed, not claimed.

A DeleteObjects request names its keys in its body. The signer checks every key against the
table's location, and the signature covers the body through ``Content-MD5`` or the payload hash
(app/storage_access/s3_requests.py ``body_binding``). That binds the body only if the store *checks* it: one
that does not (SeaweedFS, for one) deletes whatever keys a client puts in a body sent under a
signature made for another, anywhere in the bucket. So before a worker signs its first bulk
delete for a warehouse, it asks the store: two canary objects under the warehouse's location,
a delete signed for one and sent naming the other, once for each way a body is bound. Only a
store that refuses both forgeries (the other canary survives) and honours the genuine delete is
trusted; otherwise bulk deletes for that warehouse are refused with the reason, and single-object
deletes (each key in its URI, covered by the signature) go on as before.

The answer is kept per worker for as long as the warehouse row is the same (a change of its
endpoint or keys makes a new row, so a new probe). A store that cannot be reached gives no
answer (503, probed again next time).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.ground.errors import ServiceUnavailable
from app.ground.locations import Location
from app.storage_access import s3_requests
from storage.objects import S3ObjectStore
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)

PROBE_FOLDER = ".growler-probe"
BINDINGS = ("payload-hash", "content-md5")

# (method, uri, headers, body) -> the headers the signer adds (SignedRequest.headers)
SignFunction = Callable[[str, dict[str, list[str]], str], dict[str, list[str]]]


@dataclass(frozen=True)
class ProbeOutcome:
    """What the store did with one binding: a forged body refused, the genuine one honoured."""

    binding: str
    forgery_refused: bool
    genuine_honoured: bool

    @property
    def trusted(self) -> bool:
        return self.forgery_refused and self.genuine_honoured


def delete_body(*keys: str) -> str:
    objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
    return f'<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{objects}</Delete>'


class BulkDeleteTrust:
    """Per worker: warehouse name -> (the row probed, whether its store verifies bodies)."""

    def __init__(self, store_of: Callable[[WarehouseRow], S3ObjectStore]) -> None:
        self._store_of = store_of
        self._known: dict[str, tuple[WarehouseRow, bool]] = {}
        self._lock = threading.Lock()  # one probe at a time per worker: they are rare

    def known(self, warehouse: WarehouseRow) -> bool | None:
        """The answer if this worker has it for this row (the event loop may ask), else None."""
        found = self._known.get(warehouse.name)
        return found[1] if found is not None and found[0] is warehouse else None

    def trusted(self, warehouse: WarehouseRow, endpoint: str, sign: SignFunction) -> bool:
        """Whether bulk deletes may be signed for ``warehouse``: probed on first use (blocking I/O)."""
        answer = self.known(warehouse)
        if answer is not None:
            return answer
        with self._lock:
            answer = self.known(warehouse)
            if answer is None:
                outcomes = probe(self._store_of(warehouse), Location.parse(warehouse.location), endpoint, sign)
                answer = all(outcome.trusted for outcome in outcomes)
                log.warning(
                    "bulk deletes for warehouse %s: %s (%s)",
                    warehouse.name,
                    "signed" if answer else "refused: its storage does not check a body against its signature",
                    ", ".join(
                        f"{o.binding}: forgery {'refused' if o.forgery_refused else 'ACCEPTED'},"
                        f" genuine {'honoured' if o.genuine_honoured else 'failed'}"
                        for o in outcomes
                    ),
                )
                if len(self._known) > 1_000:
                    self._known.clear()
                self._known[warehouse.name] = (warehouse, answer)
        return answer


def probe(store: S3ObjectStore, root: Location, endpoint: str, sign: SignFunction) -> list[ProbeOutcome]:
    """Each binding tried on two fresh canaries under ``root``; both removed afterwards."""
    return [_probe_one(store, root, endpoint, sign, binding) for binding in BINDINGS]


def _probe_one(store: S3ObjectStore, root: Location, endpoint: str, sign: SignFunction, binding: str) -> ProbeOutcome:
    folder = root.child(PROBE_FOLDER).child(uuid.uuid4().hex)
    genuine, victim = folder.child("genuine"), folder.child("victim")
    try:
        for canary in (genuine, victim):
            store.write_new(canary, b"canary", "application/octet-stream")
        signed_body = delete_body(genuine.key)
        headers: dict[str, list[str]] = {"content-type": ["application/xml"]}
        if binding == "content-md5":
            digest = hashlib.md5(signed_body.encode()).digest()  # noqa: S324 - S3's own check
            headers["content-md5"] = [base64.b64encode(digest).decode()]
        uri = f"{endpoint.rstrip('/')}/{genuine.bucket}?delete"
        added = sign(uri, headers, signed_body)
        sent = _flat({**headers, **added})
        store.send_presigned("POST", uri, sent, delete_body(victim.key).encode())  # the forgery
        forgery_refused = store.exists(victim)
        status = store.send_presigned("POST", uri, sent, signed_body.encode())  # the genuine request
        genuine_honoured = 200 <= status < 300 and not store.exists(genuine)
        return ProbeOutcome(binding, forgery_refused, genuine_honoured)
    except ServiceUnavailable:
        raise
    except s3_requests.RefusedRequest as exc:  # the signer's own refusal: nothing to learn
        raise ServiceUnavailable(f"The bulk-delete probe could not be signed: {exc}") from exc
    finally:
        try:
            store.delete([genuine, victim])
        except ServiceUnavailable:
            log.warning("bulk-delete probe canaries left under %s", folder.uri)


def _flat(headers: dict[str, Any]) -> dict[str, str]:
    return {name: ",".join(values) for name, values in headers.items()}
