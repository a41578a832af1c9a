"""Issue 48's regret target against what the lab allows: per finished backtest run, the best pair fixed over the nights in
hindsight (the target's yardstick) and the same yardstick restricted to the LI thresholds the lab's evidence admits.

    python -m benchmarks.analyses.admissible_regret /tmp/bv/seed4*/*       # run dirs of benchmarks.backtest_variants

A threshold is *admitted* on a night when its LI calls alone, charged at the lab's out-of-fold error rate as the solver
charges it, fit the budget (``evaluation.regret.admitted``, per night ``evaluation.backtest.lab_admits``); the
restricted yardstick keeps the pairs whose threshold is admitted on every night. The backtest stage reports both
(``regret_fixed_mean``, ``regret_admitted_mean`` in metrics/backtest.json); this script recomputes them from a
finished run's saved nights, runs from before included. No model is trained again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import load
from pond.evaluation.backtest import lab_admits, night_regret
from pond.evaluation.regret import best_admitted, best_fixed
from pond.models.policy import read_policy
from pond.optimize.tonight import li_candidates


def measure(wd: Path) -> dict[str, object]:
    """Both yardsticks' best pair and the mean regret against each (points) of one finished run dir. A run of the
    backtest stage since the admitted yardstick is in it has the same figures in its ``nights.csv``; this recomputes
    them for runs from before."""
    params = load(wd / "params.yaml")
    o = params.optimize
    lab = li_candidates(pd.read_parquet(wd / "li" / "heldout_curves.parquet"), o.latency_ratio, o.pdm)
    thresholds = lab.threshold.to_numpy(float)
    pools, left, chosen, admits = [], [], [], []
    for night in sorted(d for d in (wd / "backtest").iterdir() if (d / "policy.json").exists()):
        policy = read_policy(night / "policy.json")
        r, pool, mis, _ = night_regret(policy, wd / "li", night / "um", night / "evaluation" / "decisions.parquet",
                                       params.qos)
        history = pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet")
        admits.append(lab_admits(params.with_as_of(night.name), wd / "li", wd / "features" / "vm_features.parquet",
                                 history))
        pools.append(pool)
        left.append(mis)
        chosen.append(r["chosen_pool"])
    got, ok = np.array(chosen), np.logical_and.reduce(admits)
    out: dict[str, object] = {"run": str(wd), "nights": len(got), "admitted_thresholds": int(ok[1:].sum())}
    for name, pair in (("fixed", best_fixed(pools, left, o.budget)),
                       ("admitted", best_admitted(pools, left, ok, o.budget))):
        if pair is None:
            out |= {f"{name}_threshold": None, f"{name}_regret": np.nan}
            continue
        i, j = pair
        out |= {f"{name}_threshold": None if i == 0 else float(thresholds[i]),
                f"{name}_regret": 100 * float(np.mean([p[i, j] for p in pools]) - got.mean())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run dirs (params.yaml, li, features, backtest)")
    a = ap.parse_args()
    table = pd.DataFrame([measure(wd) for wd in a.runs])
    print(table.round(2).to_string(index=False))


if __name__ == "__main__":
    main()
