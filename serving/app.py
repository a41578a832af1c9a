"""The HTTP service (DESIGN.md API): FastAPI at the edge, the engine in ``serving.engine``.

The engine is built in ``lifespan`` (off the event loop) and injected; HTTP errors are raised
only here. QoS and model endpoints are plain ``def`` (FastAPI's thread pool; ONNX Runtime
releases the GIL); the batch parses, validates and decides in a worker thread too. The single
allocation is ``async``, on the event loop: ``Engine.allocate_one`` takes microseconds (tens when
the UM model runs), less than a thread hop, and its body is capped (``max_request_kb``) so that
parsing it stays that cheap. Work per request is bounded before validation: body sizes per route,
the batch's length, the counters map, and at most ``MAX_ERRORS`` problems in a 422.
"""


import asyncio
import contextlib
import logging
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from time import perf_counter
from typing import Annotated, Any

import numpy as np
import orjson
from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import TypeAdapter, ValidationError
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from pond.core.errors import ContractError, InputFormatError, PondError
from pond.serving.columnar import ARROW_STREAM, is_arrow, read_requests, write_allocations
from pond.serving.engine import Engine
from pond.serving.hot import NULLABLE, Answers, HotRoute, is_json, request_fields
from pond.serving.observability import Metrics, Tally
from pond.serving.reload import BundleSource, EngineHolder, FileSource, NotReady, RegistrySource
from pond.serving.schemas import (
    MAX_COUNTERS,
    Allocation,
    AllocationRequest,
    BatchRequest,
    BatchResponse,
    ModelInfo,
    QosRequest,
    QosResponse,
)
from pond.serving.settings import Settings
from pond.telemetry.request import FIELDS as REQUEST_FIELDS
from pond.telemetry.request import plain_request

log = logging.getLogger("pond.serving")
ALLOCATION_FIELDS = ("decision", "memory_gb", "local_gb", "pool_gb", "znuma_gb")
MAX_ERRORS = 20     # a 422 lists at most this many problems
BATCH_PATH = "/v1/allocations/batch"
_REQUESTS = TypeAdapter(list[AllocationRequest])


def _json(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def allocation_rows(cols: dict[str, list], out: dict[str, np.ndarray], engine: Engine) -> list[dict[str, Any]]:
    """Response objects, in request order (NaN P(insensitive) -> null)."""
    p = [None if x != x else x for x in out["p_insensitive"].tolist()]
    cols_out = [out[k].tolist() for k in ALLOCATION_FIELDS]
    policy = engine.policy_summary
    return [{"vm_id": vm, **dict(zip(ALLOCATION_FIELDS, vals)), "p_insensitive": pi, "untouched_fraction": u,
             "has_history": h, "customer_history": c, "model_version": engine.version, "policy": policy}
            for vm, *vals, pi, u, h, c in zip(cols["vm_id"], *cols_out, p, out["untouched_fraction"].tolist(),
                                               out["has_history"].tolist(), out["customer_history"].tolist())]


def allocation_row(vm_id: str, out: dict[str, Any], engine: Engine) -> dict[str, Any]:
    """The response object of ``Engine.allocate_one`` (the same fields, in the same order, as a batch's)."""
    p = out["p_insensitive"]
    return {"vm_id": vm_id, **{k: out[k] for k in ALLOCATION_FIELDS}, "p_insensitive": None if p != p else p,
            "untouched_fraction": out["untouched_fraction"], "has_history": out["has_history"],
            "customer_history": out["customer_history"], "model_version": engine.version,
            "policy": engine.policy_summary}


VALUES_PER_REQUEST = 9 + MAX_COUNTERS     # a request's fields, and its counters map at most
VALIDATE_CHUNK = 256                      # requests per validation call: the GIL is free between calls


def _too_large(msg: str) -> HTTPException:
    return HTTPException(413, [{"loc": ["body", "requests"], "type": "too_large", "msg": msg}])


def structure(body: bytes) -> tuple[int, int]:
    """(objects, values) of a JSON body: its ``{`` and ``,`` outside strings (vectorized, about
    30 ms for 4 MB). Escaped backslashes and quotes are removed first, so quotes toggle strings."""
    a = np.frombuffer(body.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)
    outside = ~np.bitwise_xor.accumulate(a == ord('"'))
    return int(np.count_nonzero((a == ord("{")) & outside)), int(np.count_nonzero((a == ord(",")) & outside)) + 1


def _over(objects: int, values: int, max_batch: int) -> bool:
    return objects > 2 * max_batch + 1 or values > VALUES_PER_REQUEST * objects + 16


def parse_batch(body: bytes, max_batch: int) -> list[tuple]:
    """A batch body's requests (each its ``telemetry.request.FIELDS`` values), with bounded work whatever the
    body holds.

    Parsing JSON and validating are single C calls that hold the GIL, so their size is bounded
    before they start: a body of ``max_batch`` requests holds at most two objects per request (it
    and its counters) and ``VALUES_PER_REQUEST`` values per object. A raw byte count checks that
    in milliseconds; when braces or commas inside strings (braced GUIDs, ids with commas) push it
    over, the exact count outside strings decides. Then the requests are read by the rules' fast
    path; those it declines are validated in chunks of the batch, and the first chunk with an error
    ends the work.
    """
    if _over(body.count(b"{"), body.count(b",") + 1, max_batch) and _over(*structure(body), max_batch):
        objects, _ = structure(body)
        raise _too_large(f"more than {max_batch} requests; at most {max_batch} per batch"
                         if objects > 2 * max_batch + 1 else
                         "the body holds more values than its requests can; send {\"requests\": [objects]}")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestValidationError([{"loc": ("body",), "msg": f"invalid JSON ({exc})", "type": "json_invalid"}]) from None
    items = data.get("requests") if isinstance(data, dict) else None
    if not isinstance(items, list):     # one error at the top (the counts above bound what is inside)
        where = ("body", "requests") if isinstance(data, dict) else ("body",)
        raise RequestValidationError([{"loc": where, "type": "value_error",
                                       "msg": 'expected {"requests": [request, ...]}'}])
    extra = [k for k in data if k != "requests"]
    if extra:                           # as the single route refuses a field it does not know (BatchRequest)
        raise RequestValidationError([{"loc": ("body", k), "msg": "Extra inputs are not permitted",
                                       "type": "extra_forbidden"} for k in extra[:MAX_ERRORS]])
    if len(items) > max_batch:
        raise _too_large(f"{len(items)} requests; at most {max_batch} per batch")
    out = [plain_request(item, NULLABLE) for item in items]    # the rules' fast path (telemetry.request)
    for start in range(0, len(items), VALIDATE_CHUNK):
        declined = [i for i in range(start, min(start + VALIDATE_CHUNK, len(items))) if out[i] is None]
        if not declined:
            continue
        try:
            valid = _REQUESTS.validate_python([items[i] for i in declined])
        except ValidationError as exc:      # an accepted request has no error: the chunk's errors, in order
            raise RequestValidationError([{**e, "loc": ("body", "requests", declined[e["loc"][0]], *e["loc"][1:])}
                                          for e in exc.errors()[:MAX_ERRORS]]) from None
        for i, r in zip(declined, valid):
            out[i] = tuple(getattr(r, f) for f in REQUEST_FIELDS)
    return out


def _invalid_body(exc: ValidationError) -> RequestValidationError:
    """pydantic's errors on a raw JSON body, located under ``body`` as FastAPI locates them."""
    return RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])


def columns(requests: list[tuple]) -> dict[str, list]:
    """Validated requests (``telemetry.request.FIELDS`` values each) as the engine's request columns."""
    return {c: list(values) for c, values in zip(REQUEST_FIELDS, zip(*requests))}


class Edge:
    """ASGI middleware: bearer token on /v1/ and /metrics (401; the probes /healthz and /readyz stay open),
    body-size limit (413), counts and latency per endpoint."""

    def __init__(self, app: Any, metrics: Metrics, max_body_bytes: int, paths: set[str], token: bytes | None,
                 body_limits: dict[str, int] | None = None):
        self.app, self.metrics, self.max_body, self.paths = app, metrics, max_body_bytes, paths
        self.body_limits = body_limits or {}   # per path, below max_body: one VM's request is a few hundred bytes
        self.expected = b"Bearer " + token if token is not None else None
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
        if (self.expected is not None and (scope["path"].startswith("/v1/") or scope["path"] == "/metrics")
                and not secrets.compare_digest(headers.get(b"authorization", b""), self.expected)):
            status[0] = 401
            await _send_json(send, 401, {"detail": "missing or wrong bearer token"},
                             [(b"www-authenticate", b"Bearer")])
        elif length is not None and (not length.isdigit() or int(length) > limit):
            status[0] = 413
            await _send_json(send, 413, {"detail": [{"loc": ["body"], "msg": f"request body larger than "
                                                     f"{limit} bytes; split the batch", "type": "too_large"}]})
        elif scope["method"] == "POST" and not is_json(headers.get(b"content-type", b"")) and not (
                scope["path"] == BATCH_PATH and is_arrow(headers.get(b"content-type", b""))):
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


def create_app(settings: Settings | None = None, source: BundleSource | None = None) -> FastAPI:
    settings = settings or Settings()
    token = settings.bearer_token()     # refuses to start off loopback without a real token
    metrics = Metrics()
    if source is None and settings.registry_model:
        source = RegistrySource(settings.registry_model, settings.registry_alias, settings.mlflow_tracking_uri,
                                settings.qos_threshold)
    source = source or FileSource(settings.bundle_paths(), settings.qos_threshold)
    holder = EngineHolder(source, metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(holder.refresh)
        if holder.engine is None:
            log.error("not ready: %s", holder.last_error)
        tasks = [asyncio.create_task(every(settings.metrics_flush_s, tally.flush))]
        if settings.reload_interval_s > 0:
            tasks.append(asyncio.create_task(holder.poll(settings.reload_interval_s)))
        yield
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        tally.flush()
        metrics.worker_exit()

    otel = settings.opentelemetry   # FastAPI's native OpenTelemetry: per-request cost, off unless asked for
    # /docs and /redoc with their scripts served from the package (fastapi-offline), not a CDN: the
    # service runs on networks without one. No Swagger validator call either.
    app = FastAPIOffline(title="pond zNUMA sizing", version="1", lifespan=lifespan,
                         telemetry={"tracing": otel, "metrics": otel, "logs": otel},
                         swagger_ui_parameters={"validatorUrl": None})
    app.state.holder, app.state.metrics, app.state.settings = holder, metrics, settings

    def current() -> Engine:
        """The engine, read once per request (a swap never reaches a request already running)."""
        try:
            return holder.get()
        except NotReady as exc:
            raise HTTPException(503, f"not ready: {exc}") from None

    async def engine() -> Engine:   # async: no thread-pool hop for a pointer read
        return current()

    Current = Annotated[Engine, Depends(engine)]

    @app.exception_handler(InputFormatError)
    async def _bad_input(request: Request, exc: InputFormatError) -> JSONResponse:
        field, _, msg = str(exc).partition(": ")
        return JSONResponse({"detail": [{"loc": ["body", field], "msg": msg or str(exc), "type": "value_error"}]}, 422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()[:MAX_ERRORS]]
        return JSONResponse({"detail": errors}, 422)

    stages = {k: metrics.stage.labels(k) for k in ("enrich", "infer", "decide")}
    decisions = {k: metrics.decisions.labels(k) for k in ("pool_only", "znuma", "local_only")}

    def _decided(eng: Engine, cols: dict[str, list]) -> dict[str, np.ndarray]:
        timings: dict[str, float] = {}
        out = eng.allocate(cols, timings)
        for stage, seconds in timings.items():
            stages[stage].observe(seconds)
        for d, n in Counter(out["decision"].tolist()).items():
            decisions[d].inc(n)
        return out

    def _allocate(eng: Engine, cols: dict[str, list]) -> list[dict[str, Any]]:
        return allocation_rows(cols, _decided(eng, cols), eng)

    single_body = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": AllocationRequest.model_json_schema()}}}}

    tally = Tally(metrics, "/v1/allocations")

    def observe_stages(timings: dict[str, float]) -> None:
        for stage, seconds in timings.items():
            stages[stage].observe(seconds)

    answers = Answers(allocation_row, tally, observe_stages)

    @app.post("/v1/allocations", response_model=Allocation, openapi_extra=single_body)
    async def allocate(request: Request) -> Response:
        """One VM request, on the event loop: tens of microseconds of work cost less than a thread hop.
        A valid one is answered by ``serving.hot`` before it reaches this; this answers the rest alike."""
        eng = current()
        try:
            fields = request_fields(await request.body())
        except ValidationError as exc:
            raise _invalid_body(exc) from None
        return Response(answers.json(eng, fields), media_type="application/json")

    def batch(eng: Engine, body: bytes) -> Response:
        requests = parse_batch(body, settings.max_batch)
        return _json({"allocations": _allocate(eng, columns(requests)) if requests else []})

    def batch_arrow(eng: Engine, body: bytes) -> Response:
        """The same batch as an Arrow IPC stream, answered as one (``serving.columnar``)."""
        try:
            cols = read_requests(body, settings.max_batch)
        except ContractError as exc:
            status = 413 if exc.column == "requests" else 422
            loc = ["body"] if exc.column == "body" else ["body", "requests"] + [exc.column] * (status == 422)
            return _json({"detail": [{"loc": loc, "msg": str(exc), "type": "too_large" if status == 413 else
                                      "value_error"}]}, status)
        out = _decided(eng, cols)
        return Response(write_allocations(cols, out, eng.version, eng.policy_summary), media_type=ARROW_STREAM.decode())

    batch_body = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": BatchRequest.model_json_schema(ref_template="#/components/schemas/{model}")},
        ARROW_STREAM.decode(): {"schema": {"type": "string", "format": "binary",
                                           "description": "an Arrow IPC stream of the request columns"}}}}}

    @app.post("/v1/allocations/batch", response_model=BatchResponse, openapi_extra=batch_body)
    async def allocate_batch(request: Request) -> Response:
        """Up to ``max_batch`` VMs. Parsing, validation and the models run in a worker thread, and the
        request count is checked before any element is validated: one large or malformed batch costs
        bounded work and leaves the event loop to the other clients."""
        eng = current()
        arrow = is_arrow(request.headers.get("content-type", "").encode())
        return await asyncio.to_thread(batch_arrow if arrow else batch, eng, await request.body())

    @app.post("/v1/qos", response_model=QosResponse)
    def qos(req: QosRequest, eng: Current) -> Response:
        p, exceeds = eng.qos(req.counters)
        act = exceeds and (req.pool_gb is None or req.pool_gb > 0)
        return _json({"vm_id": req.vm_id, "p_exceeds_pdm": p, "exceeds_pdm": exceeds,
                      "action": "reconfigure_local" if act else "none", "pdm": eng.policy.pdm,
                      "model_version": eng.version})

    @app.get("/v1/model", response_model=ModelInfo)
    def model(eng: Current) -> Response:
        return _json({**eng.info, "loaded_at": holder.loaded_at,
                      "source": source.description, "policy": eng.policy.model_dump(mode="json")})

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> Response:
        eng = holder.engine
        if eng is None:
            return _json({"ready": False, "reason": holder.last_error or "loading"}, 503)
        return _json({"ready": True, "model_version": eng.version})

    @app.get("/metrics")
    async def prometheus() -> Response:
        tally.flush()       # on the event loop, the only place the hot path's tally changes
        body, media_type = await asyncio.to_thread(metrics.exposition)
        return Response(body, media_type=media_type)

    # The hot path as a plain Starlette route ahead of FastAPI's (which stays for the OpenAPI schema):
    # the handler already parses and validates its body itself, so FastAPI's dependency solving is
    # pure overhead there. Exceptions still reach the app's handlers.
    app.router.routes.insert(0, Route("/v1/allocations", allocate, methods=["POST"]))
    paths = {r.path for r in app.routes if hasattr(r, "path")}
    small = int(settings.max_request_kb * 2 ** 10)
    app.add_middleware(Edge, metrics=metrics, max_body_bytes=int(settings.max_body_mb * 2 ** 20), paths=paths,
                       body_limits={"/v1/allocations": small, "/v1/qos": small},
                       token=token)
    # the scheduler's call ahead of every layer above (serving.hot): built around the stack the app builds
    stack = app.build_middleware_stack
    app.build_middleware_stack = lambda: HotRoute(  # type: ignore[method-assign]
        stack(), lambda: holder.engine, answers, small, token)
    return app


async def every(seconds: float, work: Any) -> None:
    """``work()`` every ``seconds``; a failure is logged and the next turn tries again."""
    while True:
        await asyncio.sleep(seconds)
        try:
            work()
        except Exception:
            log.exception("periodic %s failed; retrying in %g s", getattr(work, "__qualname__", work), seconds)


def app_from_environment() -> FastAPI:
    """uvicorn's factory for ``pond serve`` (one call per worker): settings from POND_* only, the CLI
    having exported its options there; the connection limits set on the protocol class uvicorn
    imports in this worker."""
    from pond.serving.protocol import BoundedHttpToolsProtocol

    settings = Settings()
    BoundedHttpToolsProtocol.configure(int(settings.max_header_kb * 1024), settings.max_headers,
                                       settings.read_timeout_s)
    return create_app(settings)
