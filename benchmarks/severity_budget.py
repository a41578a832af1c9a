"""What the best fixed pair could pool if the budget counted the VMs slowed past the PDM, not every touch, on a
finished backtest's nights:

    python -m benchmarks.severity_budget                        # the default run: data/backtest, data/raw, ...
    python -m benchmarks.severity_budget RUN [RUN ...]          # run dirs of benchmarks.backtest_variants

The budget counts what Pond's Eq. 1 counts: every insensitive call slowed past the PDM and every zNUMA that touched
its pool node (OP). Pond's evaluation counts "scheduling mispredictions" (§6.4.3, Fig. 20 and 21): "the fraction of
VMs that will exceed the PDM", which "incorporates the overpredictions of untouched memory, how much the model
overpredicted, and the probability of this overprediction leading to a workload exceeding the PDM". Only 1-10 of the
305-725 touched zNUMAs of an acceptance run are slowed past the PDM (`benchmarks.monitor_touches`), so the two counts
admit different pairs. Per run, the pool share of the best pair fixed over the nights within the budget on every
night (``evaluation.regret.best_fixed``), four ways:

- ``touches`` / ``slowed``: what the budget counts (a zNUMA kept only where its spill at that UM target slows its
  workload past the PDM, ``evaluation.combined.slowed_by_spill``, from the scorer's truth);
- ``every`` / ``judged``: which touches the QoS monitor moves (``qos.touches``; judged by the run's monitor model
  on the VM's counters, ``benchmarks.monitor_touches.judged``).

Beside them, the pool the nightly solver realized (``nights.csv``) and, per UM target, the share of the
overpredictions slowed past the PDM: what a solver that budgets the slowed VMs would have to estimate. Prints one
JSON line per run (about a minute a run on 2 cores).
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.monitor_touches import COLUMNS, judged, layout, run_inputs
from pond.evaluation.backtest import night_regret
from pond.evaluation.combined import slowed_by_spill
from pond.evaluation.regret import best_fixed, znuma_local_gb
from pond.evaluation.truth import truth_table
from pond.models.policy import read_policy


def slowed(night: pd.DataFrame, workload: pd.Series, table: pd.DataFrame, pdm: float, local: np.ndarray
           ) -> np.ndarray:
    """Per UM target and VM, whether its touch at that target's local GB slows it past the PDM (known outcomes)."""
    known = ~night["censored"].to_numpy(bool)
    return slowed_by_spill(table, workload, night["touched_known_gb"].to_numpy(float), local, pdm) & known[None, :]


def four_ways(run: dict[str, Path]) -> dict[str, object]:
    params, monitor, vms, files = run_inputs(run)
    ratio, pdm, budget = params.optimize.latency_ratio, params.optimize.pdm, 1 - params.optimize.tp / 100
    table, _ = truth_table(run["raw"], ratio)
    pools: list[np.ndarray] = []
    grids: dict[str, list[np.ndarray]] = {}
    op_share: list[np.ndarray] = []
    for f in files:
        night = pd.read_parquet(f, columns=[*COLUMNS, "censored"])
        workload = vms["workload_id"].reindex(night["vm_id"].astype(str).to_numpy()).reset_index(drop=True)
        count = partial(slowed, night, workload, table, pdm)
        policy, um = read_policy(f.parent.parent / "policy.json"), f.parent.parent / "um"
        least = judged(night, vms, run["raw"], ratio, monitor)
        for touches, spill in (("every", np.zeros(len(night))), ("judged", least)):
            for counts, keep in (("touches", None), ("slowed", count)):
                _, pool, left, cands = night_regret(policy, run["li"], um, f, params.qos, touch_spill_pct=spill,
                                                    counted=keep)
                grids.setdefault(f"{counts}_{touches}", []).append(left)
        pools.append(pool)
        offsets = np.r_[np.nan, [json.loads((um / "manifest.json").read_text())["offsets"][f"{t:g}"]
                                 for t in cands[1][1:]]]
        local = znuma_local_gb(night, offsets)
        with np.errstate(invalid="ignore"):
            op = (local < night["memory_gb"].to_numpy(float)) & \
                (night["touched_known_gb"].to_numpy(float) > local + 1e-9) & ~night["censored"].to_numpy(bool)
        op_share.append(np.c_[op.sum(axis=1), (op & count(local)).sum(axis=1)])
    nights = pd.read_csv(run["backtest"] / "nights.csv")
    out: dict[str, object] = {"backtest": str(run["backtest"]), "nights": len(files),
                              "solver_pool_pct": round(100 * float(nights["realized_pool"].mean()), 2)}
    for way, g in grids.items():
        fixed = best_fixed(pools, g, budget)
        out[f"best_fixed_pool_pct_{way}"] = None if fixed is None else round(
            100 * float(np.mean([p[fixed] for p in pools])), 2)
        out[f"best_fixed_pair_{way}"] = None if fixed is None else [float(cands[0][fixed[0]]), cands[1][fixed[1]]]
    counts = np.sum(op_share, axis=0)
    out["op_slowed_share_by_target"] = {f"{t:g}": round(float(s / max(n, 1)), 4)
                                        for t, (n, s) in zip(cands[1][1:], counts[1:], strict=True)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="*")
    a = ap.parse_args()
    for run in a.runs or [None]:
        print(json.dumps(four_ways(layout(run))))


if __name__ == "__main__":
    main()
