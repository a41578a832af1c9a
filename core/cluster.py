"""Where the fleet-sized stages run: in this process, or on a dask.distributed cluster.

``engine.backend: dask`` hands the work that grows with the fleet to Dask: in `features` the workers
read the raw tables and write the VM features themselves, one task per creation day and then per
customer partition (``features.shuffle``); in `simulate`, the workers read and place the trace by
cluster partitions and hand back only the window's VMs (``simulator.trace``), then one sizing task
per cluster and policy (the local code each, so both engines give the same tables); in `evaluate`, the scoring of the day's VMs,
one slice per worker (``models.inference.score_in_parts``: the same scores); in `backtest`, every night's snapshot,
one task per customer partition after one split of the fleet (``features.partitioned.partitioned_snapshots``); and the
UM fits of `train_um` and `backtest` to LightGBM's distributed learner, on rows the workers hold and encode
(``models.um_dask``, ``models.dask_fit``; close to the local model, not equal to it).
The cluster is the one at ``DASK_SCHEDULER_ADDRESS`` (``pond --scheduler``), or else a ``LocalCluster`` of ``engine.workers`` processes with
``engine.worker_memory`` each, started here and stopped when the stage ends. Dask is imported
only when it is asked for. With the local engine, `simulate`'s sizing tasks (the same ones) run on ``engine.workers``
threads of this process (``run_threads``): their compiled replays release the GIL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from pond.core.errors import ConfigError
from pond.core.params import EngineParams
from pond.core.progress import progress
from pond.core.runtime import Runtime

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
T = TypeVar("T")


@contextmanager
def session(p: EngineParams) -> Iterator[Any | None]:
    """A ``distributed.Client`` for the stage (None with the local engine)."""
    if p.backend == "local":
        yield None
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError:   # pragma: no cover - the train install has it
        raise ConfigError("engine.backend is dask but dask.distributed is not installed: "
                          "install the train extra (bash scripts/setup.sh)") from None
    address = Runtime.now().dask_scheduler_address
    if address:
        try:
            client = Client(address, timeout="30s")
        except OSError as exc:
            raise ConfigError(f"no Dask scheduler answers at {address} ({exc}): start one "
                              f"(dask scheduler) or unset {SCHEDULER_ENV} to start a LocalCluster") from None
        with client:
            yield client
        return
    with LocalCluster(n_workers=p.workers, threads_per_worker=1, memory_limit=p.worker_memory,
                      processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def run_all(client: Any | None, fn: Callable[..., T], tasks: Iterable[tuple]) -> list[T]:
    """``fn(*task)`` for every task, in order: here, or one Dask task each."""
    tasks = list(tasks)
    if client is None:
        return [fn(*t) for t in tasks]
    futures = [client.submit(fn, *t, pure=False) for t in tasks]
    return client.gather(futures)


def run_threads(workers: int, desc: str, fn: Callable[..., T], tasks: Iterable[tuple]) -> list[T]:
    """``fn(*task)`` for every task, in order, on ``workers`` threads (one: here): for tasks that spend their time
    in compiled code that releases the GIL, where processes would copy each task's arrays."""
    tasks = list(tasks)
    if workers <= 1 or len(tasks) <= 1:
        return [fn(*t) for t in progress(tasks, len(tasks), desc=desc, unit="tasks")]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(progress(pool.map(lambda t: fn(*t), tasks), len(tasks), desc=desc, unit="tasks"))
