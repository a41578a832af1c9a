"""The ASGI layer every request crosses after ``serving.hot``: the bearer token, body limits, the media type,
and the request count and latency per endpoint."""

from __future__ import annotations

import logging
from time import perf_counter
from typing import Any

import orjson
from starlette.requests import ClientDisconnect

from pond.core.errors import PondError
from pond.serving.access import Access
from pond.serving.columnar import is_arrow
from pond.serving.hot import is_json
from pond.serving.observability import Metrics

log = logging.getLogger("pond.serving")


class Edge:
    """ASGI middleware: bearer token on /v1/ and /metrics (401; the probes /healthz and /readyz stay open),
    body-size limit (413), JSON bodies (415; Arrow too on ``arrow_paths``), counts and latency per endpoint."""

    def __init__(self, app: Any, metrics: Metrics, max_body_bytes: int, paths: set[str], token: bytes | None,
                 body_limits: dict[str, int] | None = None, arrow_paths: frozenset[str] = frozenset()):
        self.app, self.metrics, self.max_body, self.paths = app, metrics, max_body_bytes, paths
        self.body_limits = body_limits or {}   # per path, below max_body: one VM's request is a few hundred bytes
        self.arrow_paths = arrow_paths
        self.access = Access(token)
        self._children: dict[tuple[str, int], Any] = {}
        self._latency = {p: metrics.latency.labels(p) for p in (*paths, "other")}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        endpoint = scope["path"] if scope["path"] in self.paths else "other"
        start, status = perf_counter(), [500]
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        limit = self.body_limits.get(scope["path"], self.max_body)
        if self.access.protects(scope["path"]) and not self.access.allows(headers.get(b"authorization")):
            status[0] = 401
            await _send_json(send, 401, {"detail": "missing or wrong bearer token"},
                             [(b"www-authenticate", b"Bearer")])
        elif length is not None and (not length.isdigit() or int(length) > limit):
            status[0] = 413
            await _send_json(send, 413, {"detail": [{"loc": ["body"], "msg": f"request body larger than "
                                                     f"{limit} bytes; split the batch", "type": "too_large"}]})
        elif scope["method"] == "POST" and not is_json(headers.get(b"content-type", b"")) and not (
                scope["path"] in self.arrow_paths and is_arrow(headers.get(b"content-type", b""))):
            status[0] = 415
            await _send_json(send, 415, {"detail": [{"loc": ["header", "content-type"], "type": "unsupported_media_type",
                                                     "msg": "send the body as JSON with content-type application/json"}]})
        else:
            seen = [0]

            async def limited_receive() -> dict:
                msg = await receive()
                seen[0] += len(msg.get("body", b""))
                if seen[0] > limit:
                    raise _TooLarge()
                return msg

            async def tracking_send(msg: dict) -> None:
                if msg["type"] == "http.response.start":
                    status[0] = msg["status"]
                await send(msg)

            try:
                await self.app(scope, limited_receive, tracking_send)
            except ClientDisconnect:     # the client hung up mid-body: nothing to answer, nothing broke
                status[0] = 499
                log.info("client %s hung up before its request to %s arrived", scope.get("client"), scope["path"])
            except _TooLarge:
                status[0] = 413
                await _send_json(send, 413, {"detail": [{"loc": ["body"], "msg": "request body too large",
                                                         "type": "too_large"}]})
        key = (endpoint, status[0])
        if key not in self._children:
            self._children[key] = self.metrics.requests.labels(endpoint, str(status[0]))
        self._children[key].inc()
        self._latency[endpoint].observe(perf_counter() - start)


class _TooLarge(PondError):
    """The body outgrew the limit while it streamed in (no Content-Length to refuse it up front)."""


async def _send_json(send: Any, status: int, body: dict, extra: list[tuple[bytes, bytes]] = ()) -> None:
    data = orjson.dumps(body)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *extra]})
    await send({"type": "http.response.body", "body": data})
