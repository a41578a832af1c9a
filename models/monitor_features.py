"""The monitor's inputs, as training and serving build them: the LI model's features of the counts (event rates,
TMA metrics), the stalls the pool explains (and the rule that scores them) and the allocation they were counted
under. Kept apart from the training code so that the service, whose install has no scikit-learn, builds them with
the same function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pond.features.tma import CLKS, REQUIRED_EVENTS, TMA_COLUMNS, event_rates, partial_tma_metrics, rate_name

POOL_SHARE = "alloc:pool_share"          # share of the memory on the pool, 0-1 (a lab run: its spilled share)
LATENCY_RATIO = "alloc:latency_ratio"    # the pool's latency over local DRAM's
ALLOCATION = (POOL_SHARE, LATENCY_RATIO)
POOL_STALLS = "pool_stalls"              # stall cycles per cycle the pool's extra latency explains (``pool_stalls``)
LOCAL_DRAM, REMOTE_DRAM = "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM", "MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM"
STALL_EVENTS = ("CYCLE_ACTIVITY.STALLS_L3_MISS", "DTLB_LOAD_MISSES.WALK_ACTIVE")    # DRAM-bound stalls, page walks
DEMAND_CYCLES = "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD"   # cycles a demand miss is out


def reads_stalls(names: Sequence[str]) -> bool:
    """Whether a monitor with these inputs (``monitor_feature_names``) reads every event ``pool_stalls`` needs: where
    it does not, the service cannot score the stalls, so no rule is fit on them."""
    return {rate_name(e) for e in (LOCAL_DRAM, REMOTE_DRAM, *STALL_EVENTS)} <= set(names)


def tma_columns_from(events: Sequence[str]) -> list[str]:
    """The TMA metrics these events give on their own: those whose formula reads no other event."""
    have = set(events)
    ones = pd.DataFrame([{e: 1.0 if e in have else np.nan for e in REQUIRED_EVENTS}])
    row = partial_tma_metrics(ones).iloc[0]
    return [c for c in TMA_COLUMNS if np.isfinite(row[c])]


def monitor_feature_names(events: Sequence[str]) -> list[str]:
    """The model's inputs, in order, when it reads ``events``: each one's rate per cycle, the TMA metrics they give,
    the allocation. With every event the lab counts, these are the LI model's features and the allocation."""
    return [*(rate_name(e) for e in events if e != CLKS), *tma_columns_from(events), *ALLOCATION]


def monitor_events(wanted: Sequence[str] | None, recorded: Sequence[str]) -> tuple[list[str], list[str]]:
    """The events the monitor reads, in the order the lab records them, and those of ``wanted``
    (``train_monitor.events``; None: every recorded event) that the lab does not count: a lab that counts other
    events trains on those it has, never fails the night. The cycle count is always read: every rate is per cycle."""
    if wanted is None:
        return list(recorded), []
    have = set(recorded)
    read = [e for e in recorded if e == CLKS or e in set(wanted)]
    return read, [e for e in wanted if e not in have]


def monitor_features(counts: pd.DataFrame, events: Sequence[str], pool_share: np.ndarray | pd.Series,
                     latency_ratio: np.ndarray | pd.Series) -> pd.DataFrame:
    """The rates of ``events``, the TMA metrics (NaN where they read an event the counts lack: a model that reads
    fewer events selects only the metrics they give) and the allocation the counts were counted under."""
    f = pd.concat([event_rates(counts, [e for e in events if e != CLKS]), partial_tma_metrics(counts)], axis=1)
    f = f.astype(np.float32)
    f[POOL_STALLS] = pool_stalls(counts, latency_ratio).astype(np.float32)
    f[POOL_SHARE] = np.asarray(pool_share, dtype=np.float32)
    f[LATENCY_RATIO] = np.asarray(latency_ratio, dtype=np.float32)
    return f


def pool_stalls(counts: pd.DataFrame, latency_ratio: np.ndarray | pd.Series) -> np.ndarray:
    """Per row of raw counts, the stall cycles per cycle that the pool's extra latency explains, times the share of
    the L3-missing loads served remotely (by the pool). A first-order analytic estimate, as CAMP and Memstrata
    reason: it reads the mechanisms a forest trained on a few lab workloads may not have seen slow a VM.

    - The DRAM-bound stalls while a demand miss is outstanding (at most ``DEMAND_CYCLES``) and the page-walk
      cycles: a load that waited locally waits longer, so ``(r - 1) / r`` of them is the pool's.
    - The DRAM-bound stalls past the cycles with a demand miss outstanding: loads waiting on a prefetch that the
      pool made late. A prefetch hides local DRAM's latency, so all of that stall is the pool's (counting it at
      ``(r - 1) / r`` as well halved a late-prefetch workload's estimate). Without ``DEMAND_CYCLES`` every stall is
      counted as a demand miss's.

    NaN where the counts lack an event the first part reads."""
    n = len(counts)
    def rate(e: str) -> np.ndarray:
        if e not in counts.columns or CLKS not in counts.columns:
            return np.full(n, np.nan)
        c, clk = counts[e].to_numpy(np.float64), counts[CLKS].to_numpy(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(clk > 0, c / clk, np.nan)
    local, remote = rate(LOCAL_DRAM), rate(REMOTE_DRAM)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(local + remote > 0, remote / (local + remote), 0.0)
    share = np.where(np.isnan(local) | np.isnan(remote), np.nan, share)
    r = np.asarray(latency_ratio, dtype=np.float64)
    stalls, demand = rate(STALL_EVENTS[0]), rate(DEMAND_CYCLES)
    waited = np.where(np.isnan(demand), stalls, np.fmin(stalls, demand))
    late = (stalls - waited) * (r > 1.0)          # no prefetch is late on a pool as fast as local DRAM
    return ((waited + rate(STALL_EVENTS[1])) * np.clip((r - 1.0) / r, 0.0, 1.0) + late) * share


@dataclass(frozen=True)
class StallRule:
    """P(exceeds the PDM) from the pool-stall estimate alone (``pool_stalls``, in % of cycles): a
    logistic fit on the lab's spill runs. Monotone in the stalls the pool explains, so a VM slowed by a mechanism the
    forest saw on too few lab workloads to learn (page walks served by the pool) still scores by what it shows. The
    monitor scores a VM by the larger of the forest's P and this one (``train_monitor.stall_rule``)."""
    coef: float
    intercept: float

    def p(self, stalls: np.ndarray) -> np.ndarray:
        z = self.coef * 100.0 * np.asarray(stalls, np.float64) + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))


def either(forest: np.ndarray, rule: StallRule | None, stalls: np.ndarray) -> np.ndarray:
    """The monitor's score: the forest's P(exceeds), or the stall rule's where that is higher (NaN stalls: the
    forest's alone)."""
    return forest if rule is None else np.fmax(forest, rule.p(stalls))
