"""Where the served bundle comes from, and the holder that swaps it without touching requests.

A source names the bundle it would serve now (``current``: a cheap check) and builds an engine
for it (``load``: verify, score, warm). The holder polls the source off the request path and
replaces one attribute; a request reads that attribute once, so it never mixes two versions.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pond.core.errors import ConfigError, PondError
from pond.core.progress import environ
from pond.models import bundle
from pond.models.bundle import BundlePaths
from pond.serving.engine import Engine, bundle_version
from pond.serving.observability import Metrics
from pond.serving.settings import REGISTRY_BACKOFF_S

T = TypeVar("T")

log = logging.getLogger("pond.serving")


class BundleSource(Protocol):
    description: str

    def current(self) -> str: ...

    def load(self) -> Engine: ...


class FileSource:
    """The bundle `dvc repro` leaves in the work tree (policy.json, both model dirs, the snapshot)."""

    def __init__(self, paths: BundlePaths, qos_threshold: float):
        self.paths, self.qos_threshold = paths, qos_threshold
        self.description = f"files:{paths.policy}"

    def current(self) -> str:
        return bundle_version(self.paths)

    def load(self) -> Engine:
        return Engine.load(self.paths, self.qos_threshold)


DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


def check_registry_uri(uri: str) -> None:
    """A database URI needs MLflow's SQL store, which the ``serve`` install (mlflow-skinny) lacks."""
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme in DATABASE_SCHEMES and importlib.util.find_spec("sqlalchemy") is None:
        raise ConfigError(f"POND_MLFLOW_TRACKING_URI={uri!r} is a database, which the service's install cannot "
                          "open: point it at the MLflow server in front of that database (http://host:5000), or "
                          "install the train role (POND_ROLE=train bash scripts/setup.sh)")


class RegistrySource:
    """The bundle an MLflow registered-model alias points at (`champion`, moved by `pond register`).

    MLflow servers never reload a model when an alias moves (docs/libraries.md): this source is polled.
    The bundle is downloaded, every file checked against bundle.json, then loaded like a file bundle.
    """

    def __init__(self, model_name: str, alias: str, tracking_uri: str, qos_threshold: float,
                 timeout_s: int = 5, retries: int = 2):
        check_registry_uri(tracking_uri)
        self.model_name, self.alias, self.tracking_uri = model_name, alias, tracking_uri
        self.qos_threshold, self.timeout_s, self.retries = qos_threshold, timeout_s, retries
        self.description = f"models:/{model_name}@{alias} ({tracking_uri})"

    def _bounded(self) -> contextlib.AbstractContextManager[None]:
        """MLflow's client reads its timeout and retries from the environment at each call, and by default
        retries for about 4 minutes (a failure went uncounted that long, and held the process at exit):
        these calls get the service's own budget, and the environment is left as it was."""
        return environ({"MLFLOW_HTTP_REQUEST_TIMEOUT": str(self.timeout_s),
                        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(self.retries),
                        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": str(REGISTRY_BACKOFF_S),
                        "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0"})

    def _version(self):   # an mlflow ModelVersion
        import mlflow
        from mlflow import MlflowClient

        mlflow.set_tracking_uri(self.tracking_uri)
        with self._bounded():
            return MlflowClient().get_model_version_by_alias(self.model_name, self.alias)

    def current(self) -> str:
        return f"{self.model_name}/v{self._version().version}"

    def load(self) -> Engine:
        import mlflow

        mv = self._version()
        with self._bounded():
            local = bundle.located(Path(mlflow.artifacts.download_artifacts(artifact_uri=mv.source)))
        bundle.verify(local)
        return Engine.load(BundlePaths.of(local), self.qos_threshold, label=f"{self.model_name}/v{mv.version}")


class NotReady(PondError):
    """No bundle is loaded yet (or none could be): the service answers 503."""


def settle_heap() -> None:
    """Collect once, then freeze what survives (the engine, its caches, the imported modules) out of the cyclic
    collector's sight. A full collection walks every tracked object, and the engine holds about 100,000 of them: on
    a 1,000-VM JSON batch loop it paused 61-69 ms every few hundred batches (0 pauses and a max of 8.5 ms frozen).
    Refcounting still frees frozen objects; ``swap`` unfreezes first so that a replaced engine's cycles are freed.
    The one collection per load holds the GIL for about as long as one of those pauses."""
    gc.collect()
    gc.freeze()


class EngineHolder:
    def __init__(self, source: BundleSource, metrics: Metrics):
        self.source, self.metrics = source, metrics
        self.engine: Engine | None = None
        self.loaded_at: str | None = None
        self.last_error: str | None = None

    def get(self) -> Engine:
        engine = self.engine            # one read: the whole request uses this engine
        if engine is None:
            raise NotReady(self.last_error or "the model bundle is still loading")
        return engine

    def swap(self, engine: Engine) -> None:
        gc.unfreeze()                   # the engine replaced goes back to the collector, which frees it below
        self.engine = engine
        self.loaded_at = datetime.now(UTC).isoformat(timespec="seconds")
        self.last_error = None
        settle_heap()
        self.metrics.ready.set(1)

    def refresh(self) -> bool:
        """Load the source's bundle if it differs from the one served; keep serving on failure."""
        try:
            if self.engine is not None and self.source.current() == self.engine.version:
                return False
            engine = self.source.load()
        except Exception as exc:   # noqa: BLE001  a half-written bundle (pipeline mid-run) must not stop serving
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.metrics.reloads.labels("failed").inc()
            log.warning("bundle not loaded from %s: %s", self.source.description, self.last_error)
            return False
        self.swap(engine)
        self.metrics.reloads.labels("loaded").inc()
        log.info("serving bundle %s from %s", engine.version, self.source.description)
        return True

    async def poll(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await off_loop(self.refresh)


async def off_loop(work: Callable[[], T]) -> T:
    """``work()`` in a daemon thread of its own, awaited. Not ``asyncio.to_thread``: the default executor's
    threads are joined at exit, so a poll stuck on a registry that does not answer held the process after
    SIGTERM (as PID 1, for minutes). A daemon thread is left behind when the service stops; a cancelled
    await leaves it to finish, or not, on its own."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(exc: BaseException | None, value: Any) -> None:
        if not done.done():
            done.set_exception(exc) if exc is not None else done.set_result(value)

    def run() -> None:
        try:
            value, exc = work(), None
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting task
            value, exc = None, error
        with contextlib.suppress(RuntimeError):     # the loop closed while the work ran: nobody waits
            loop.call_soon_threadsafe(settle, exc, value)

    threading.Thread(target=run, name=f"pond-{getattr(work, '__name__', 'work')}", daemon=True).start()
    return await done
