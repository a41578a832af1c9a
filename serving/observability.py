"""Prometheus metrics of one app instance (its own registry, so several apps can live in a process).

With several workers (``pond serve --workers N``) each is a process of its own: prometheus_client's
multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by the CLI before the workers start) has every
worker write its values to files there, and ``/metrics``, whichever worker answers, sums them.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

LATENCY_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("pond_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
                                registry=self.registry)
        self.latency = Histogram("pond_request_seconds", "request latency by endpoint", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.stage = Histogram("pond_stage_seconds", "time per stage of an allocation (enrich, infer, decide)",
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
        if os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    @staticmethod
    def worker_exit() -> None:
        """Drop this worker's live gauges from the sum (multiprocess mode only)."""
        if os.environ.get(MULTIPROC_ENV):
            mark_process_dead(os.getpid())
