"""The regret target against what the lab allows: per finished backtest run, the best pair fixed over the nights in
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

import pandas as pd

from pond.core.params import load
from pond.evaluation.backtest import lab_admits, night_regret, pair, with_fixed_regret
from pond.models.policy import read_policy


def measure(wd: Path) -> dict[str, object]:
    """Both yardsticks' best pair and the mean regret against each (points) of one finished run dir, as the backtest
    stage computes them (``with_fixed_regret``); a run since the stage reports them has them in its ``nights.csv``,
    this recomputes them for runs from before."""
    params = load(wd / "params.yaml")
    runs = wd / "backtest"
    saved = sorted(d for d in runs.iterdir() if (d / "policy.json").exists()) if runs.is_dir() else []
    if not saved:
        raise SystemExit(f"{wd / 'backtest'}: no night with a policy.json; run the backtest in {wd} first")
    grids, chosen, admits = [], [], []
    for night in saved:
        policy = read_policy(night / "policy.json")
        r, pool, mis, candidates = night_regret(policy, wd / "li", night / "um",
                                                night / "evaluation" / "decisions.parquet", params.qos)
        history = pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet")
        admits.append(lab_admits(params.with_as_of(night.name), wd / "li", wd / "features" / "vm_features.parquet",
                                 history))
        grids.append((pool, mis))
        chosen.append(r["chosen_pool"])
    nights = pd.DataFrame({"budget": params.optimize.budget, "chosen_pool": chosen})
    nights, fixed, admitted = with_fixed_regret(nights, grids, admits)
    out: dict[str, object] = {"run": str(wd), "nights": len(nights),
                              "admitted_thresholds": int(nights.admitted_thresholds.iloc[0])}
    for name, at in (("fixed", fixed), ("admitted", admitted)):
        out |= {f"{name}_threshold": None if at is None else pair(candidates, at)["li_threshold"],
                f"{name}_regret": 100 * float(nights[f"regret_{name}"].mean())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run dirs (params.yaml, li, features, backtest)")
    a = ap.parse_args()
    table = pd.DataFrame([measure(wd) for wd in a.runs])
    print(table.round(2).to_string(index=False))


if __name__ == "__main__":
    main()
