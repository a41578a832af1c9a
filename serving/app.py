"""The HTTP service (docs/design.md, The HTTP API), laid out as FastAPI's own template lays one out.

``create_app`` builds the service's parts (``serving.dependencies.Service``), the engine in ``lifespan`` (off
the event loop), the routers (``serving.routes``), the error handlers and the middleware (``serving.middleware``),
with the scheduler's hot path (``serving.hot``) in front of them all. HTTP errors are raised only at this edge:
in the routes, their dependencies and the handlers here. Work per request is bounded before validation: body
sizes per route, the batch's length (``serving.batch``), the counters map, and at most ``MAX_ERRORS`` problems
in a 422.
"""

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline

from pond.core.errors import InputFormatError
from pond.serving.batch import MAX_ERRORS, TooLarge
from pond.serving.dependencies import Service
from pond.serving.hot import PATH, HotRoute
from pond.serving.middleware import Edge
from pond.serving.observability import Metrics
from pond.serving.reload import BundleSource, EngineHolder, FileSource, RegistrySource, off_loop
from pond.serving.routes import allocations, operations
from pond.serving.settings import Settings

log = logging.getLogger("pond.serving")


def create_app(settings: Settings | None = None, source: BundleSource | None = None) -> FastAPI:
    settings = settings or Settings()
    token = settings.bearer_token()     # refuses to start off loopback without a real token
    if source is None and settings.registry_model:
        source = RegistrySource(settings.registry_model, settings.registry_alias, settings.mlflow_tracking_uri,
                                settings.qos_threshold, settings.registry_timeout_s, settings.registry_retries)
        _check_budget(settings)
    source = source or FileSource(settings.bundle_paths(), settings.qos_threshold)
    metrics = Metrics()
    service = Service(settings, EngineHolder(source, metrics), metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        holder = service.holder
        await off_loop(service.flags.open)
        await off_loop(holder.refresh)
        if holder.engine is None:
            log.error("not ready: %s", holder.last_error)
        tasks = [asyncio.create_task(every(settings.metrics_flush_s, service.tally.flush))]
        if settings.reload_interval_s > 0:
            tasks.append(asyncio.create_task(holder.poll(settings.reload_interval_s)))
        yield
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        service.tally.flush()
        service.flags.close()
        metrics.worker_exit()
        gc.unfreeze()                   # what settle_heap froze is freed as the process ends

    otel = settings.opentelemetry   # FastAPI's native OpenTelemetry: per-request cost, off unless asked for
    # /docs and /redoc with their scripts served from the package (fastapi-offline), not a CDN: the
    # service runs on networks without one. No Swagger validator call either.
    app = FastAPIOffline(title="pond zNUMA sizing", version="1", lifespan=lifespan,
                         telemetry={"tracing": otel, "metrics": otel, "logs": otel},
                         swagger_ui_parameters={"validatorUrl": None})
    app.state.service = service
    routers = (allocations.router, operations.router)
    for router in routers:
        app.include_router(router)
    app.add_exception_handler(InputFormatError, _bad_input)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(TooLarge, _too_large)

    small = int(settings.max_request_kb * 2 ** 10)
    app.add_middleware(Edge, metrics=metrics, max_body_bytes=int(settings.max_body_mb * 2 ** 20),
                       paths=_paths(app, routers),
                       body_limits={PATH: small, "/v1/qos": small}, token=token,
                       arrow_paths=allocations.ARROW_PATHS)
    # the scheduler's call ahead of every layer above (serving.hot): built around the stack the app builds
    stack = app.build_middleware_stack
    app.build_middleware_stack = lambda: HotRoute(  # type: ignore[method-assign]
        stack(), lambda: service.holder.engine, service.answers, small, token)
    return app


def _check_budget(settings: Settings) -> None:
    """Say at start how long a registry outage can go uncounted, and warn when a poll can outlast its interval."""
    budget, interval = settings.registry_budget_s(), settings.reload_interval_s
    log.info("registry calls give up after %.0f s (POND_REGISTRY_TIMEOUT_S=%d, POND_REGISTRY_RETRIES=%d); polled "
             "every %g s", budget, settings.registry_timeout_s, settings.registry_retries, interval)
    if 0 < interval < budget:
        log.warning("a registry poll can take %.0f s, longer than POND_RELOAD_INTERVAL_S=%g: an outage is counted "
                    "up to %.0f s late. Fix: lower POND_REGISTRY_TIMEOUT_S or POND_REGISTRY_RETRIES", budget,
                    interval, interval + budget)


def _paths(app: FastAPI, routers: tuple) -> set[str]:
    """Every path the app answers, each counted under its own label: the routers' (included lazily, so not in
    ``app.router.routes``) and the app's own (the documentation pages)."""
    own = {r.path for r in app.router.routes if hasattr(r, "path")}
    return own | {r.path for router in routers for r in router.routes}


async def _bad_input(request: Request, exc: Exception) -> JSONResponse:
    field, _, msg = str(exc).partition(": ")
    return JSONResponse({"detail": [{"loc": ["body", field], "msg": msg or str(exc), "type": "value_error"}]}, 422)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()[:MAX_ERRORS]]
    return JSONResponse({"detail": errors}, 422)


async def _too_large(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": [{"loc": ["body", "requests"], "type": "too_large", "msg": str(exc)}]}, 413)


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
