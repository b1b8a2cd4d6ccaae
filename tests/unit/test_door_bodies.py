"""The operation door hands a request whose body it read to connexion with that body intact.

Driven at the ASGI level with the catalog's own route table and a downstream app that records
what it receives: a body the door cannot read, and a body it read for an operation answered on
the loop that then asks for connexion (``None``), both reach the next app byte for byte.
"""

from __future__ import annotations

import asyncio
import json

from app.edge.door import OperationDoor
from app.edge.factory import load_spec
from app.edge.operations import RouteTable
from app.edge.resolver import find_handler
from app.edge.validation import validator_map

BODY = json.dumps({"region": "us-east-1", "uri": "http://s3/b/k", "method": "GET", "headers": {}}).encode()


class Downstream:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send) -> None:
        message = await receive()
        self.bodies.append(message.get("body", b""))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


class DeclinesToSign:
    operation_id = "signRequest"

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def __call__(self, kwargs, headers, in_thread):
        self.bodies.append(kwargs["body"])
        return None


def request(door: OperationDoor, body: bytes, content_type: bytes = b"application/json") -> None:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/wh/namespaces/ns/tables/t/sign",
        "raw_path": b"/v1/wh/namespaces/ns/tables/t/sign",
        "query_string": b"",
        "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())],
    }
    chunks = [
        {"type": "http.request", "body": body[:10], "more_body": True},
        {"type": "http.request", "body": body[10:]},
    ]

    async def receive():
        return chunks.pop(0)

    async def send(message):
        pass

    asyncio.run(door(scope, receive, send))


def door_with(downstream: Downstream, loop_read: DeclinesToSign) -> OperationDoor:
    routes = RouteTable.compile(
        load_spec(), find_handler, bodies=frozenset({"signRequest"}), body_validator=validator_map()["body"]["*/*json"]
    )
    return OperationDoor(
        downstream,
        routes=routes,
        handler_for=find_handler,
        flask_app=None,
        serialize=json.dumps,
        threads=1,
        loop_reads=[loop_read],
    )


def test_a_body_read_then_declined_reaches_connexion_whole():
    downstream, loop_read = Downstream(), DeclinesToSign()
    request(door_with(downstream, loop_read), BODY)
    assert loop_read.bodies == [json.loads(BODY)]
    assert downstream.bodies == [BODY]


def test_a_body_the_door_cannot_read_reaches_connexion_whole():
    downstream, loop_read = Downstream(), DeclinesToSign()
    malformed = BODY[:-1]
    request(door_with(downstream, loop_read), malformed)
    assert loop_read.bodies == []
    assert downstream.bodies == [malformed]
