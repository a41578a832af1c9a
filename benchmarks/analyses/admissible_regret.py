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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import Params, load
from pond.evaluation.backtest import lab_admits, night_regret, pair, with_fixed_regret
from pond.models.policy import Policy, read_policy


@dataclass(frozen=True)
class Replayed:
    """A finished run's saved nights, each judged on its next day as the backtest stage judges it: per night its
    policy, ``night_regret``'s figures and grids (pool share, left slowed) and the thresholds the lab admits."""
    params: Params
    nights: list[Path]
    policies: list[Policy]
    regrets: list[dict[str, float]]
    grids: list[tuple[np.ndarray, np.ndarray]]
    admits: list[np.ndarray]
    candidates: list

    def fixed(self) -> tuple[pd.DataFrame, tuple[int, int] | None, tuple[int, int] | None]:
        """``with_fixed_regret`` over the nights: per night the regret against both yardsticks, and their pairs."""
        table = pd.DataFrame({"budget": self.params.optimize.budget,
                              "chosen_pool": [r["chosen_pool"] for r in self.regrets]})
        return with_fixed_regret(table, self.grids, self.admits)


def replayed(wd: Path) -> Replayed:
    """The saved nights of the run dir ``wd`` (params.yaml, li, features, backtest), judged again; no model is
    trained."""
    params = load(wd / "params.yaml")
    runs = wd / "backtest"
    saved = sorted(d for d in runs.iterdir() if (d / "policy.json").exists()) if runs.is_dir() else []
    if not saved:
        raise SystemExit(f"{wd / 'backtest'}: no night with a policy.json; run the backtest in {wd} first")
    policies, regrets, grids, admits, candidates = [], [], [], [], []
    for night in saved:
        policy = read_policy(night / "policy.json")
        r, pool, left, candidates = night_regret(policy, wd / "li", night / "um",
                                                 night / "evaluation" / "decisions.parquet", params.qos)
        history = pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet")
        admits.append(lab_admits(params.with_as_of(night.name), wd / "li", wd / "features" / "vm_features.parquet",
                                 history))
        policies.append(policy)
        regrets.append(r)
        grids.append((pool, left))
    return Replayed(params, saved, policies, regrets, grids, admits, candidates)


def measure(wd: Path) -> dict[str, object]:
    """Both yardsticks' best pair and the mean regret against each (points) of one finished run dir, as the backtest
    stage computes them (``with_fixed_regret``); a run since the stage reports them has them in its ``nights.csv``,
    this recomputes them for runs from before."""
    run = replayed(wd)
    nights, fixed, admitted = run.fixed()
    candidates = run.candidates
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
