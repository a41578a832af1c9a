"""Top-down (TMA) metrics and run-length-free event rates from raw Intel server-core counters.

Formulas (Yasin, ISPASS'14; Skylake/Cascade Lake server, 4-wide, SMT off), with
``CLKS = CPU_CLK_UNHALTED.THREAD`` and ``SLOTS = 4 * CLKS``:

- frontend_bound  = IDQ_UOPS_NOT_DELIVERED.CORE / SLOTS
- bad_speculation = (UOPS_ISSUED.ANY - UOPS_RETIRED.RETIRE_SLOTS + 4 * INT_MISC.RECOVERY_CYCLES_ANY) / SLOTS
- retiring        = UOPS_RETIRED.RETIRE_SLOTS / SLOTS
- backend_bound   = 1 - frontend_bound - bad_speculation - retiring
- memory_bound    = (CYCLE_ACTIVITY.STALLS_MEM_ANY + EXE_ACTIVITY.BOUND_ON_STORES) / BE_CYCLES * backend_bound,
  BE_CYCLES = EXE_ACTIVITY.EXE_BOUND_0_PORTS + EXE_ACTIVITY.1_PORTS_UTIL
            + retiring * EXE_ACTIVITY.2_PORTS_UTIL + CYCLE_ACTIVITY.STALLS_MEM_ANY + EXE_ACTIVITY.BOUND_ON_STORES
- l1_bound   = (CYCLE_ACTIVITY.STALLS_MEM_ANY - CYCLE_ACTIVITY.STALLS_L1D_MISS) / CLKS
- l2_bound   = (CYCLE_ACTIVITY.STALLS_L1D_MISS - CYCLE_ACTIVITY.STALLS_L2_MISS) / CLKS
- l3_bound   = (CYCLE_ACTIVITY.STALLS_L2_MISS - CYCLE_ACTIVITY.STALLS_L3_MISS) / CLKS
- dram_bound = CYCLE_ACTIVITY.STALLS_L3_MISS / CLKS
- store_bound = EXE_ACTIVITY.BOUND_ON_STORES / CLKS

Beside TMA, two signals of how a miss is served:

- l3_miss_latency (cycles) = OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD / OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD
  (Little's law; Memstrata's outlier signal)
- mlp = OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD
        / OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD
  (average misses in flight while at least one is)

The per-level bounds use the simplified (pre-4.0) TMA forms that need no hit-ratio events.
Shares are clipped to [0, 1] because multiplexed counters can make differences slightly negative.
Every raw event is also divided by CLKS, so a 10-minute run and a 10-hour run of the same code
give the same features. Rows with CLKS <= 0 give NaN, never inf.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.core.errors import ContractError
from pond.telemetry.request import near_names

CLKS = "CPU_CLK_UNHALTED.THREAD"
REQUIRED_EVENTS: tuple[str, ...] = (
    CLKS, "IDQ_UOPS_NOT_DELIVERED.CORE", "UOPS_ISSUED.ANY", "UOPS_RETIRED.RETIRE_SLOTS",
    "INT_MISC.RECOVERY_CYCLES_ANY", "CYCLE_ACTIVITY.STALLS_MEM_ANY", "CYCLE_ACTIVITY.STALLS_L1D_MISS",
    "CYCLE_ACTIVITY.STALLS_L2_MISS", "CYCLE_ACTIVITY.STALLS_L3_MISS", "EXE_ACTIVITY.BOUND_ON_STORES",
    "EXE_ACTIVITY.EXE_BOUND_0_PORTS", "EXE_ACTIVITY.1_PORTS_UTIL", "EXE_ACTIVITY.2_PORTS_UTIL",
    "OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD", "OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD",
    "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD",
)
TMA_COLUMNS: tuple[str, ...] = (
    "tma_frontend_bound", "tma_bad_speculation", "tma_retiring", "tma_backend_bound", "tma_memory_bound",
    "tma_l1_bound", "tma_l2_bound", "tma_l3_bound", "tma_dram_bound", "tma_store_bound",
    "l3_miss_latency", "mlp",
)


def require_events(df: pd.DataFrame, table: str) -> None:
    missing = [e for e in REQUIRED_EVENTS if e not in df.columns]
    near = near_names(df.columns, missing)
    if near:
        name, event = next(iter(near.items()))
        raise ContractError(table, f"the file has {len(near)} of the PMU events spelled in another case, e.g. "
                            f"{name!r} for {event!r}", column=event,
                            fix="name event columns as docs/design.md does, in upper case (rename them)")
    if missing:
        raise ContractError(table, f"PMU events needed for TMA metrics are missing: {missing}",
                            column=missing[0], fix="count these core events (see features/tma.py)")


def _div(a: pd.Series | np.ndarray, b: pd.Series | np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a / b
    return np.where(b > 0, out, np.nan)


def tma_metrics(counts: pd.DataFrame, table: str = "counters") -> pd.DataFrame:
    """TMA level-1/2/3 memory metrics, L3-miss latency and MLP for each row of raw counts."""
    require_events(counts, table)
    return partial_tma_metrics(counts)


def partial_tma_metrics(counts: pd.DataFrame) -> pd.DataFrame:
    """As ``tma_metrics``, from counts that may lack some of the events: a metric reading one of them is NaN (the
    QoS monitor reads fewer events than TMA needs, and only the metrics they give)."""
    nan = np.full(len(counts), np.nan)
    c = {e: counts[e].to_numpy(np.float64) if e in counts.columns else nan for e in REQUIRED_EVENTS}
    clk = c[CLKS]
    slots = 4.0 * clk
    fe = _div(c["IDQ_UOPS_NOT_DELIVERED.CORE"], slots)
    bs = _div(c["UOPS_ISSUED.ANY"] - c["UOPS_RETIRED.RETIRE_SLOTS"] + 4.0 * c["INT_MISC.RECOVERY_CYCLES_ANY"], slots)
    ret = _div(c["UOPS_RETIRED.RETIRE_SLOTS"], slots)
    fe, bs, ret = (np.clip(x, 0.0, 1.0) for x in (fe, bs, ret))
    be = np.clip(1.0 - fe - bs - ret, 0.0, 1.0)
    mem_stalls = c["CYCLE_ACTIVITY.STALLS_MEM_ANY"] + c["EXE_ACTIVITY.BOUND_ON_STORES"]
    be_cycles = (c["EXE_ACTIVITY.EXE_BOUND_0_PORTS"] + c["EXE_ACTIVITY.1_PORTS_UTIL"]
                 + ret * c["EXE_ACTIVITY.2_PORTS_UTIL"] + mem_stalls)
    share = lambda a, b=clk: np.clip(_div(a, b), 0.0, 1.0)
    out = {
        "tma_frontend_bound": fe, "tma_bad_speculation": bs, "tma_retiring": ret, "tma_backend_bound": be,
        "tma_memory_bound": np.clip(_div(mem_stalls, be_cycles) * be, 0.0, 1.0),
        "tma_l1_bound": share(c["CYCLE_ACTIVITY.STALLS_MEM_ANY"] - c["CYCLE_ACTIVITY.STALLS_L1D_MISS"]),
        "tma_l2_bound": share(c["CYCLE_ACTIVITY.STALLS_L1D_MISS"] - c["CYCLE_ACTIVITY.STALLS_L2_MISS"]),
        "tma_l3_bound": share(c["CYCLE_ACTIVITY.STALLS_L2_MISS"] - c["CYCLE_ACTIVITY.STALLS_L3_MISS"]),
        "tma_dram_bound": share(c["CYCLE_ACTIVITY.STALLS_L3_MISS"]),
        "tma_store_bound": share(c["EXE_ACTIVITY.BOUND_ON_STORES"]),
        "l3_miss_latency": _div(c["OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD"],
                                c["OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD"]),
        "mlp": _div(c["OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD"],
                    c["OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD"]),
    }
    return pd.DataFrame(out, index=counts.index)


def rate_name(event: str) -> str:
    return f"rate:{event}"


def event_rates(counts: pd.DataFrame, events: list[str]) -> pd.DataFrame:
    """Each event per unhalted cycle (``rate:<EVENT>`` columns)."""
    clk = counts[CLKS].to_numpy(np.float64)
    vals = counts[events].to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(clk[:, None] > 0, vals / clk[:, None], np.nan)
    return pd.DataFrame(rates, columns=[rate_name(e) for e in events], index=counts.index)


def pmu_features(counts: pd.DataFrame, events: list[str], table: str = "counters") -> pd.DataFrame:
    """The feature vector of the latency-insensitivity model: event rates then TMA metrics.

    Works on any table of raw counts: a lab run, a VM's counters, or counts summed over a
    workload history (summing then dividing weights each run by its length).
    """
    rates = event_rates(counts, [e for e in events if e != CLKS])
    return pd.concat([rates, tma_metrics(counts, table)], axis=1).astype(np.float32)
