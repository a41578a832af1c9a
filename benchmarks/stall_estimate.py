"""How closely the QoS monitor's pool-stall estimate follows the slowdown the counters carry, per workload:

    python -m benchmarks.stall_estimate [--raw data/raw] [--ratios 1.82 2.22] [--pdm 5]

For every workload of a data set's population (``contract.POOL_FILE``: its mechanisms and local rates, which the
built-in fleet writes) it builds the counters of a run with the whole footprint on the pool at each ratio
(``telemetry.fleet.pool_counters.pool_rates``, without counter noise) and compares, per cycle of that run:

- ``visible``: the extra cycles the four mechanisms add (``extra_cycles``), the part of the slowdown a counter can
  carry (the unexplained ``eta`` is not in it);
- ``estimate``: ``models.monitor_features.pool_stalls`` on those counters, what the stall rule scores;
- ``demand_only``: the same without ``OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD``, which counts
  every DRAM-bound stall at ``(r - 1) / r`` as a demand miss's (the estimate before late prefetches were counted in
  full).

Per ratio and per workload's main mechanism (the one adding most cycles) it prints the workloads, the median and
10th/90th percentiles of estimate / visible, and over all workloads the correlation and the share of (past the PDM,
within it) pairs the estimate ranks right (the AUC), for both estimates. Reads the generator's mechanisms, so it runs
on a built-in draw only; a minute at most.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from pond.models.monitor_features import DEMAND_CYCLES, pool_stalls
from pond.telemetry.contract import POOL_FILE
from pond.telemetry.fleet.pool_counters import MECHANISMS, access_share, extra_cycles, pool_rates
from pond.telemetry.io import read_raw

RUN_CYCLES = 1e11       # a run long enough that rounding to whole counts does not matter


def auc(score: np.ndarray, past: np.ndarray) -> float | None:
    """The share of (past, within) pairs ``score`` ranks past above within (ties: half)."""
    n1, n0 = int(past.sum()), int((~past).sum())
    if n1 == 0 or n0 == 0:
        return None
    ranks = rankdata(score)
    return float((ranks[past].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def estimates(population: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """Per workload: its main mechanism, the visible extra and both estimates, per cycle of the run on the pool."""
    lat = population[["workload_id", *MECHANISMS]].reset_index(drop=True)
    rates = population[[c for c in population.columns if c not in MECHANISMS and c != "workload_id"]]
    counts = pool_rates(lat, rates.reset_index(drop=True), ratio, 100.0) * RUN_CYCLES
    extra = pd.DataFrame(extra_cycles(lat, ratio, access_share(lat, 100.0)))
    total = extra.sum(axis=1).to_numpy()
    r = np.full(len(lat), ratio)
    return pd.DataFrame({"workload_id": lat.workload_id, "mechanism": extra.idxmax(axis=1).where(total > 0, "none"),
                         "visible": total / (1.0 + total), "estimate": pool_stalls(counts, r),
                         "demand_only": pool_stalls(counts.drop(columns=[DEMAND_CYCLES]), r)})


def summary(e: pd.DataFrame, pdm: float) -> dict:
    """Estimate / visible by mechanism, and the fit over all workloads (module doc)."""
    out: dict = {}
    seen = e[e.visible > 0]
    for name in ("estimate", "demand_only"):
        ratio = seen[name] / seen.visible
        out[name] = {"correlation": round(float(np.corrcoef(e.visible, e[name])[0, 1]), 4),
                     "auc_at_pdm": round(auc(e[name].to_numpy(), (100 * e.visible > pdm).to_numpy()) or np.nan, 4),
                     "by_mechanism": {m: {"workloads": len(q), "median": round(float(q.median()), 3),
                                          "p10": round(float(q.quantile(0.1)), 3),
                                          "p90": round(float(q.quantile(0.9)), 3)}
                                      for m, q in ratio.groupby(seen.mechanism)}}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", type=Path, default=Path("data/raw"))
    ap.add_argument("--ratios", type=float, nargs="+", default=[1.82, 2.22])
    ap.add_argument("--pdm", type=float, default=5.0, help="the PDM, in %% of the visible slowdown")
    args = ap.parse_args()
    path = args.raw / POOL_FILE
    if not path.exists():
        raise SystemExit(f"{path} is missing: the stall estimate is judged on a built-in draw's mechanisms")
    population = read_raw(path, "population_pool").drop_duplicates("workload_id")
    for ratio in args.ratios:
        print(json.dumps({"latency_ratio": ratio, **summary(estimates(population, ratio), args.pdm)}))


if __name__ == "__main__":
    main()
