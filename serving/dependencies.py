"""What a route is given (FastAPI ``Depends``): the service's parts, and the engine this request uses.

``create_app`` builds one ``Service`` per app and keeps it on ``app.state``; a route asks for it, or for
``CurrentEngine``, which reads the holder once, so a reload never reaches a request already running.
Dependencies are ``async``: FastAPI runs a plain ``def`` one in its thread pool, a hop that costs more
than the pointer read it would do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, HTTPException, Request

from pond.serving.engine import Engine
from pond.serving.flag_memory import FlagMemory
from pond.serving.hot import PATH, Answers
from pond.serving.observability import Metrics, Tally
from pond.serving.reload import EngineHolder, NotReady
from pond.serving.responses import allocation_row
from pond.serving.settings import Settings


@dataclass
class Service:
    """One app's settings, engine holder and metrics, what the allocation routes count with them, and the
    memory of the QoS monitor's flags they refuse LI calls by."""

    settings: Settings
    holder: EngineHolder
    metrics: Metrics
    flags: FlagMemory = field(init=False)
    tally: Tally = field(init=False)        # the single route's counts, added to ``metrics`` in bulk
    answers: Answers = field(init=False)    # the single route's answers, built once per request shape
    stages: dict[str, Any] = field(init=False)
    decisions: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.stages = {k: self.metrics.stage.labels(k) for k in ("enrich", "infer", "decide")}
        self.decisions = {k: self.metrics.decisions.labels(k) for k in ("pool_only", "znuma", "local_only")}
        self.tally = Tally(self.metrics, PATH)
        self.flags = FlagMemory(self.settings.qos_flags, self.settings.qos_refusal_hours)
        self.answers = Answers(allocation_row, self.tally, self.observe_stages, self.flags.refused)

    def engine(self) -> Engine:
        """The engine, read once per request; 503 while none is loaded."""
        try:
            return self.holder.get()
        except NotReady as exc:
            raise HTTPException(503, f"not ready: {exc}") from None

    def observe_stages(self, timings: dict[str, float]) -> None:
        for stage, seconds in timings.items():
            self.stages[stage].observe(seconds)

    def decide(self, engine: Engine, cols: dict[str, list]) -> dict[str, np.ndarray]:
        """``Engine.allocate`` on a batch's columns, its stage times and decisions counted."""
        timings: dict[str, float] = {}
        refused = None
        if self.flags.until:
            refused = np.fromiter(map(self.flags.refused, cols["customer_id"], cols["vm_type"]), dtype=bool,
                                  count=len(cols["vm_type"]))
        out = engine.allocate(cols, timings, refused)
        self.observe_stages(timings)
        for d, n in Counter(out["decision"].tolist()).items():
            self.decisions[d].inc(n)
        return out


async def service(request: Request) -> Service:
    return request.app.state.service


async def engine(request: Request) -> Engine:
    return request.app.state.service.engine()


ServiceDep = Annotated[Service, Depends(service)]
CurrentEngine = Annotated[Engine, Depends(engine)]
