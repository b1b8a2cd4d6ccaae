"""Request-size limits over real HTTP (gunicorn + uvicorn), streamed bodies included."""

from __future__ import annotations

import httpx
import psycopg

TEN_MB = 10 * 1024 * 1024


def namespace_count(services) -> int:
    with psycopg.connect(services.database_url) as conn:
        return conn.execute("SELECT count(*) FROM namespace").fetchone()[0]


def assert_too_large(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == 413
    assert response.json()["error"]["type"] == "BadRequestException"


def test_declared_oversized_body(server, services, clean_catalog):
    body = b'{"namespace": ["big"], "properties": {"k": "' + b"x" * TEN_MB + b'"}}'
    response = httpx.post(
        f"{server.url}/v1/namespaces", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert_too_large(response)
    assert namespace_count(services) == 0


def test_chunked_oversized_body(server, services, clean_catalog):
    def chunks():
        yield b'{"namespace": ["big"], "properties": {"k": "'
        for _ in range(10):
            yield b"x" * (1024 * 1024)
        yield b'"}}'

    response = httpx.post(
        f"{server.url}/v1/namespaces", content=chunks(), headers={"content-type": "application/json"}, timeout=30
    )
    assert_too_large(response)
    assert namespace_count(services) == 0


def test_small_chunked_body_is_accepted(server, services, clean_catalog):
    def chunks():
        yield b'{"namespace": '
        yield b'["streamed"]}'

    response = httpx.post(
        f"{server.url}/v1/namespaces", content=chunks(), headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 200, response.text
    assert namespace_count(services) == 1
