"""How far the replay's own placement moves a difference between two policies: the reach a verdict must clear.

The interval over clusters (``simulator.intervals``) says how much the choice of clusters moves a saving. It does not
hold the replay's own sensitivity: as a provider buys, each cluster gets one local size and one pool size, found by
placing every policy afresh with a first fit, and a first fit answers a small change in the trace with another
schedule. Leaving out 1% of the VMs moves a saving as a provider buys by a point or two, while on the trace's own
servers it moves a fixed split by about a hundredth of its share, what the 1% itself changes. A difference smaller
than that is not evidence, whatever its interval over clusters.

So before the sizing answer calls one policy better than another, each of a few seeded draws leaves out ``share`` of
the VMs (the same ones under both policies and all local), sizes both on what is left, and sets their difference
against the one on every VM. The reach is the largest change over the draws: the verdict is decided only beyond it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from pond.models.names import ALL_LOCAL
from pond.simulator.sizing import Policy, Question, Trace, take_policy

Sizer = Callable[[Trace, dict[str, Policy], Question], pd.DataFrame]   # ``fleet_sizing`` or its Dask twin


def saving(table: pd.DataFrame, policy: str, pool_sockets: int, column: str = "required_gb") -> float:
    """A policy's saving over the whole table's clusters: ``1 - its GB / all local's``; all local (or no pool)
    saves 0."""
    if policy == ALL_LOCAL or not pool_sockets:
        return 0.0
    base = float(table.loc[table.policy == ALL_LOCAL, column].sum())
    rows = table[(table.policy == policy) & (table.pool_sockets == pool_sockets)]
    return 1.0 - float(rows[column].sum()) / base if base > 0 else 0.0


@dataclass(frozen=True)
class Leaveout:
    """How the reach is drawn: ``draws`` seeded draws (seeds ``seed``, ``seed + 1``, ...), each leaving out
    ``share`` of the VMs (``simulate.reach_share``, ``simulate.reach_draws``; the seed is ``base.seed``)."""

    share: float
    draws: int
    seed: int


def kept(n: int, share: float, seed: int) -> np.ndarray:
    """A seeded mask that leaves out about ``share`` of ``n`` VMs."""
    return np.random.default_rng(seed).random(n) >= share


def reach(size: Sizer, trace: Trace, policies: dict[str, Policy], q: Question, full: pd.DataFrame,
          a: tuple[str, int], b: tuple[str, int], leave: Leaveout) -> float:
    """The largest change, over ``leave``'s seeded draws, of ``a``'s saving minus ``b``'s (each (policy, pool
    sockets); all local: ``("all_local", 0)``) against the same difference in ``full`` (the sizing on every VM).
    0 when there is nothing to leave out or the two are the same policy."""
    names = {p for p, k in (a, b) if p != ALL_LOCAL and k}
    if leave.draws <= 0 or leave.share <= 0 or a == b or not len(trace):
        return 0.0
    on_every = saving(full, *a) - saving(full, *b)
    sockets = tuple(sorted({k for p, k in (a, b) if p != ALL_LOCAL and k}))
    moved = 0.0
    for d in range(leave.draws):
        keep = kept(len(trace), leave.share, leave.seed + d)
        table = size(trace.take(keep), {n: take_policy(policies[n], keep) for n in sorted(names)},
                     replace(q, pool_sockets=sockets))
        moved = max(moved, abs(saving(table, *a) - saving(table, *b) - on_every))
    return round(moved, 5)
