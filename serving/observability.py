"""Prometheus metrics of one app instance (its own registry, so several apps can live in a process).

With several workers (``pond serve --workers N``) each is a process of its own: prometheus_client's
multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by the CLI before the workers start) has every
worker write its values to files there, and ``/metrics``, whichever worker answers, sums them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from pond.core.runtime import Runtime

MULTIPROC_ENV = Runtime.variable("prometheus_multiproc_dir")

LATENCY_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("pond_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
                                registry=self.registry)
        self.latency = Histogram("pond_request_seconds", "request latency by endpoint", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.stage = Histogram("pond_stage_seconds", "time per stage of an allocation the engine computed (enrich, infer, "
                               "decide); a request shape already answered is not computed again",
                               ["stage"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.decisions = Counter("pond_decisions", "allocations by decision", ["decision"], registry=self.registry)
        self.um_cache = Counter("pond_um_cache", "single allocations whose UM prediction was cached (hit) or run (miss)",
                                ["outcome"], registry=self.registry)
        self.reloads = Counter("pond_reloads", "bundle reloads by outcome", ["outcome"], registry=self.registry)
        # with workers: 1 only when every live worker serves a warmed bundle
        self.ready = Gauge("pond_ready", "1 when a warmed bundle is serving", registry=self.registry,
                           multiprocess_mode="livemin")

    def exposition(self) -> tuple[bytes, str]:
        """The text /metrics returns: this process's registry, or every worker's values summed."""
        if Runtime.now().prometheus_multiproc_dir:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    @staticmethod
    def worker_exit() -> None:
        """Drop this worker's live gauges from the sum (multiprocess mode only)."""
        if Runtime.now().prometheus_multiproc_dir:
            mark_process_dead(os.getpid())


def add_observations(child: Any, values: Sequence[float]) -> None:
    """``Histogram.observe`` for each of ``values``, done per bucket instead of per value.

    prometheus_client has no bulk observe; this adds to the child's bucket and sum values, which
    ``observe`` itself updates (tests/serving/test_hot.py compares the two expositions).
    """
    if not len(values):
        return
    bounds = child._upper_bounds
    counts = np.bincount(np.searchsorted(bounds, values, side="left"), minlength=len(bounds))
    child._sum.inc(float(np.sum(values)))
    for i in np.flatnonzero(counts).tolist():
        child._buckets[i].inc(int(counts[i]))


class Tally:
    """The scheduler's call counted in plain Python, added to ``Metrics`` in bulk by ``flush``.

    A Prometheus update takes a lock (and, with workers, writes a shared file): four of them per
    request cost about 5% of a worker's time at full load (docs/changelog.md, "Where a single request's time goes"). Here a
    request appends its latency and bumps two ints. Only the event loop touches a tally; it is
    flushed before ``/metrics`` answers, every ``POND_METRICS_FLUSH_S`` and when the worker stops, so
    another worker's ``/metrics`` sees this one's answers at most that late.
    """

    def __init__(self, metrics: Metrics, endpoint: str) -> None:
        self.metrics, self.endpoint = metrics, endpoint
        self.latency: list[float] = []          # one per 200 answer: also the request count
        self.decisions: dict[str, int] = {}
        self.um_cache = {"hit": 0, "miss": 0}

    def flush(self) -> None:
        latency, self.latency = self.latency, []
        decisions, self.decisions = self.decisions, {}
        um, self.um_cache = self.um_cache, {"hit": 0, "miss": 0}
        m = self.metrics
        if latency:
            m.requests.labels(self.endpoint, "200").inc(len(latency))
            add_observations(m.latency.labels(self.endpoint), latency)
        for decision, n in decisions.items():
            m.decisions.labels(decision).inc(n)
        for outcome, n in um.items():
            if n:
                m.um_cache.labels(outcome).inc(n)
