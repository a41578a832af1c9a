"""Progress of the long stages: a tqdm bar on a terminal, plain lines in a log, nothing when quiet.

A night's job runs under `dvc repro`, cron or CI, where stderr is a file: there a bar's carriage
returns would bury the log, so at most about ten plain lines per loop are printed, each with the
count, the elapsed time and an ETA. ``POND_QUIET=1`` (``pond --quiet``) silences both: the operator's
setting. Code that runs a step inside another (`backtest`'s nightly `train_um`, a worker's task) silences it with
``silenced``, a context variable of this thread: it leaves the environment alone, so nothing else in the process
(another task on the same worker, a later stage of an in-process caller) is silenced by it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import TypeVar

from pond.core.runtime import Runtime

QUIET_ENV = Runtime.variable("quiet")
T = TypeVar("T")


_SILENCED: ContextVar[bool] = ContextVar("pond_silenced", default=False)


def quiet() -> bool:
    return _SILENCED.get() or Runtime.now().quiet


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))


def line(done: int, total: int | None, elapsed: float, desc: str, unit: str) -> str:
    """One plain progress line: ``desc: 40/100 nights (40%), 0:00:31 elapsed, ETA 0:00:46``."""
    if not total:
        return f"{desc}: {done} {unit}, {_clock(elapsed)} elapsed"
    eta = elapsed / done * (total - done) if done else float("nan")
    left = _clock(eta) if done else "?"
    return f"{desc}: {done}/{total} {unit} ({done / total:.0%}), {_clock(elapsed)} elapsed, ETA {left}"


def progress(items: Iterable[T], total: int | None = None, desc: str = "", unit: str = "steps") -> Iterator[T]:
    """``items``, reporting on stderr as they are consumed."""
    if quiet():
        yield from items
        return
    total = total if total is not None else (len(items) if hasattr(items, "__len__") else None)  # type: ignore[arg-type]
    if sys.stderr.isatty():
        from tqdm import tqdm
        yield from tqdm(items, total=total, desc=desc, unit=f" {unit}", file=sys.stderr, dynamic_ncols=True)
        return
    start, shown = time.monotonic(), -1
    for done, item in enumerate(items, 1):
        yield item
        bucket = 10 * done // total if total else done
        if bucket != shown:
            shown = bucket
            print(line(done, total, time.monotonic() - start, desc, unit), file=sys.stderr, flush=True)


@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """The process environment with ``values`` set inside (a stage and the workers it starts read them), and as
    it was afterwards: an in-process caller (`pond`'s ``main`` from a notebook or a test) is not left changed."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def silenced() -> Iterator[None]:
    """No progress inside (a stage run as one step of another: `backtest`'s nightly `train_um`)."""
    token = _SILENCED.set(True)
    try:
        yield
    finally:
        _SILENCED.reset(token)


class Steps:
    """Named phases of a stage without a countable loop (``features [2/4] customer percentiles``)."""

    def __init__(self, name: str, total: int):
        self.name, self.total, self.done, self.start = name, total, 0, time.monotonic()

    def __call__(self, label: str) -> None:
        self.done += 1
        if not quiet():
            print(f"{self.name} [{self.done}/{self.total}] {label} ({_clock(time.monotonic() - self.start)} elapsed)",
                  file=sys.stderr, flush=True)
