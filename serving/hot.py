"""The scheduler's call, ahead of FastAPI's stack: one ASGI layer that answers a valid ``POST /v1/allocations``
itself and hands everything else to the app as it came.

A profile of the route under wrk (docs/changelog.md, "Where a single request's time goes") found about 15% of a worker's time in the layers a
request crosses before its route (error, telemetry and body-limit middlewares, ``Edge``, exception handling,
the router). This layer does what the valid request needs of them (the bearer token, the body limit, the
content type, the request count and latency) and nothing else. Anything it does not answer 200 (a refusal, an
invalid body, an engine not ready, a client that hangs up) goes to the app with its body replayed, so every
refusal is the app's, byte for byte. An error in the answer itself (a bug) reaches uvicorn, which answers 500.

A valid body is read by ``telemetry.request.plain_request`` (the rules' fast path) and answered from
``Answers``: the JSON of each request shape is built once per engine.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

import orjson
from pydantic import ValidationError

from pond.serving.access import Access
from pond.serving.observability import Tally
from pond.serving.schemas import AllocationRequest
from pond.telemetry.request import FIELDS, plain_request

PATH = "/v1/allocations"
HEADERS_JSON = (b"content-type", b"application/json")
NULLABLE = frozenset({"counters"})      # AllocationRequest's own field: not used to size, allowed when null
ANSWER_ENTRIES = 65_536                 # request shapes kept per engine (emptied when full), as the UM cache
_EMPTY_ID = len(b'{"vm_id":""')


def media_type(content_type: bytes) -> bytes:
    """The media type of a Content-Type header, without its parameters, in lower case."""
    return content_type.split(b";", 1)[0].strip().lower()


def is_json(content_type: bytes) -> bool:
    return media_type(content_type) == b"application/json"


def request_fields(body: bytes) -> tuple:
    """The request's ``FIELDS`` values; pydantic's ValidationError where ``AllocationRequest`` refuses the body."""
    try:
        fields = plain_request(orjson.loads(body), NULLABLE)
    except orjson.JSONDecodeError:     # pydantic's parser decides alone (it words errors its own way)
        fields = None
    if fields is not None:
        return fields
    req = AllocationRequest.model_validate_json(body)
    return tuple(getattr(req, f) for f in FIELDS)


class Answers:
    """The JSON answer of one VM request, built once per request shape and engine.

    An answer is a pure function of the request's shape (every field but ``vm_id``) and the engine:
    the UM prediction, P(insensitive), the decision and the policy summary. VMs come in groups and
    customers repeat their sizes, so most requests find their shape here and cost a dict look-up and
    one concatenation; a new engine (a reload) starts afresh. ``row`` builds the response object
    (``vm_id`` first) from ``Engine.allocate_one``'s output; ``stages`` receives its timings; ``refused``: whether
    a customer and VM type get no LI call now (``serving.flag_memory``), which makes a shape of its own.
    """

    def __init__(self, row: Callable[[str, dict, Any], dict], tally: Tally,
                 stages: Callable[[dict[str, float]], None], refused: Callable[[str, str], bool]) -> None:
        self.row, self.tally, self.stages, self.refused = row, tally, stages, refused
        self.engine: Any = None
        self.cache: dict[tuple, tuple[str, bytes]] = {}

    def json(self, engine: Any, fields: tuple) -> bytes:
        if engine is not self.engine:
            self.engine, self.cache = engine, {}
        refused = self.refused(fields[1], fields[2])
        shape = (*fields[1:], True) if refused else fields[1:]
        hit = self.cache.get(shape)
        tally = self.tally
        if hit is None:
            timings: dict[str, float] = {}
            out = engine.allocate_one(*fields[1:], timings, refused)
            self.stages(timings)
            tally.um_cache["miss" if "infer" in timings else "hit"] += 1
            hit = out["decision"], orjson.dumps(self.row("", out, engine))[_EMPTY_ID:]
            if len(self.cache) >= ANSWER_ENTRIES:
                self.cache.clear()
            self.cache[shape] = hit
        else:
            tally.um_cache["hit"] += 1
        tally.decisions[hit[0]] = tally.decisions.get(hit[0], 0) + 1
        return b'{"vm_id":' + orjson.dumps(fields[0]) + hit[1]


class HotRoute:
    """``app`` with ``POST /v1/allocations`` answered here when it is valid (see the module)."""

    def __init__(self, app: Any, engine: Callable[[], Any], answers: Answers, limit: int,
                 token: bytes | None) -> None:
        self.app, self.engine, self.answers, self.limit = app, engine, answers, limit
        self.access = Access(token)

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
                or not self.access.allows(auth)):
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
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        engine = self.engine()
        if size > self.limit or engine is None:
            return await self.app(scope, _replay(body, receive), send)
        try:
            fields = request_fields(body)
        except ValidationError:                 # the app refuses it, as it refuses any invalid body
            return await self.app(scope, _replay(body, receive), send)
        data = self.answers.json(engine, fields)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"%d" % len(data)), HEADERS_JSON]})
        await send({"type": "http.response.body", "body": data})
        self.answers.tally.latency.append(perf_counter() - start)


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
