"""The scheduler's call, ahead of FastAPI's stack: one ASGI layer that answers a valid ``POST /v1/allocations``
itself and hands everything else to the app as it came.

A profile of the route under wrk (docs/results.md, issue 50) found about 15% of a worker's time in the layers a
request crosses before its route (error, telemetry and body-limit middlewares, ``Edge``, exception handling,
the router). This layer does what the valid request needs of them (the bearer token, the body limit, the
content type, the request count and latency) and nothing else. Anything it does not answer 200 (a refusal, an
invalid body, an engine not ready, a client that hangs up) goes to the app with its body replayed, so every
refusal is the app's, byte for byte. An error in the answer itself (a bug) reaches uvicorn, which answers 500.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from time import perf_counter
from typing import Any

import orjson
from pydantic import ValidationError

from serving.schemas import AllocationRequest

PATH = "/v1/allocations"
HEADERS_JSON = (b"content-type", b"application/json")


def media_type(content_type: bytes) -> bytes:
    """The media type of a Content-Type header, without its parameters, in lower case."""
    return content_type.split(b";", 1)[0].strip().lower()


def is_json(content_type: bytes) -> bool:
    return media_type(content_type) == b"application/json"


class HotRoute:
    """``app`` with ``POST /v1/allocations`` answered here when it is valid (see the module)."""

    def __init__(self, app: Any, engine: Callable[[], Any], answer: Callable[[Any, Any], dict], limit: int,
                 token: bytes | None, count: Callable[[], Any], latency: Any) -> None:
        self.app, self.engine, self.answer, self.limit = app, engine, answer, limit
        self.expected = b"Bearer " + token if token is not None else None
        self.count, self.latency = count, latency

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        start = perf_counter()
        length = content_type = auth = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"content-type":
                content_type = value
            elif name == b"authorization":
                auth = value
        if (length is None or not length.isdigit() or int(length) > self.limit or content_type is None
                or not is_json(content_type)
                or (self.expected is not None and not secrets.compare_digest(auth or b"", self.expected))):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":     # the client hung up: the app logs and counts it
                return await self.app(scope, _replay(b"".join(chunks), receive, msg), send)
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit or not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        engine = self.engine()
        if size > self.limit or engine is None:
            return await self.app(scope, _replay(body, receive), send)
        try:
            req = AllocationRequest.model_validate_json(body)
        except ValidationError:                 # the app refuses it, as it refuses any invalid body
            return await self.app(scope, _replay(body, receive), send)
        data = orjson.dumps(self.answer(engine, req))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(data)).encode()), HEADERS_JSON]})
        await send({"type": "http.response.body", "body": data})
        self.count()
        self.latency.observe(perf_counter() - start)


def _replay(body: bytes, receive: Any, disconnect: dict | None = None) -> Callable:
    """A ``receive`` that gives the body read so far as one message, then the client's next message (or the
    disconnect that came before the body ended, where the app then meets it)."""
    sent = [False]

    async def replayed() -> dict:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": disconnect is not None}
        return disconnect if disconnect is not None else await receive()

    return replayed
