"""The least an ASGI app on Growler's stack can do to answer W1 (see bench/floor.py).

Served by gunicorn with uvicorn workers, like Growler; each request takes a connection from a
psycopg_pool asyncio pool, reads the namespace row with the statement Growler uses, and sends
the JSON answer. Nothing else: no routing, validation, authentication, log line or metric.
"""

from __future__ import annotations

import json
import os
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from storage.namespaces import NAMESPACE_PROPERTIES

NAMESPACE = os.environ.get("FLOOR_NAMESPACE", "ns000")
_pool: AsyncConnectionPool | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _pool
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                size = int(os.environ.get("FLOOR_POOL_SIZE", "8"))  # Growler's GROWLER_DB_ASYNC_POOL_MAX
                _pool = AsyncConnectionPool(
                    os.environ["FLOOR_DATABASE_URL"],
                    min_size=size,
                    max_size=size,
                    kwargs={"autocommit": True, "row_factory": dict_row},
                    open=False,
                )
                await _pool.open(wait=True)
                await send({"type": "lifespan.startup.complete"})
            else:
                await _pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    assert _pool is not None
    async with _pool.connection() as conn:
        cursor = await conn.execute(NAMESPACE_PROPERTIES, (1, [NAMESPACE]))
        row = await cursor.fetchone()
    body = json.dumps({"namespace": [NAMESPACE], "properties": row["properties"]}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
