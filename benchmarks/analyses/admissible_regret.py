"""Issue 48's regret target against what the lab allows: per finished backtest run, the best pair fixed over the nights in
hindsight (the target's yardstick) and the same yardstick restricted to the LI thresholds the lab's evidence admits.

    python -m benchmarks.analyses.admissible_regret /tmp/bv/seed4*/*       # run dirs of benchmarks.backtest_variants

A threshold is *admitted* on a night when its LI calls alone, charged at the lab's out-of-fold error rate as the solver
charges it (the Jeffreys posterior's ``optimize.confidence`` quantile, times the share of recent VMs called, as
`optimize` computed it that night), fit the budget: a solver that trusts its lab cannot choose any other, whatever
the UM half. The restricted yardstick keeps the pairs whose threshold is admitted on every night. Grids are the
backtest's own (``evaluation.backtest.night_regret``: pool share and what the QoS monitor leaves slowed), recomputed
from the saved nights; no model is trained again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import load
from pond.evaluation.backtest import night_regret
from pond.evaluation.regret import best_fixed
from pond.models.policy import read_policy
from pond.optimize.solver import error_draws, error_rate
from pond.optimize.tonight import li_candidates, li_model, recent_li_shares


def admitted(li_vm: np.ndarray, called: np.ndarray, errors: np.ndarray, level: float | None, budget: float
             ) -> np.ndarray:
    """Per LI candidate (the first: LI off), whether its calls alone fit the budget at the lab's rate: the solver's
    own posterior (``optimize.solver``), its mean or its ``level`` quantile."""
    q = error_rate(called, errors) if level is None else error_draws(called, errors, np.array([level]))[:, 0]
    return np.asarray(li_vm, float) * q <= budget + 1e-12


def restricted_fixed(pools: list[np.ndarray], left: list[np.ndarray], ok: np.ndarray, budget: float
                     ) -> tuple[int, int] | None:
    """``best_fixed`` among the pairs whose LI threshold ``ok`` admits (every UM target of an admitted threshold)."""
    masked = [np.where(ok[:, None], m, np.inf) for m in left]
    return best_fixed(pools, masked, budget)


def measure(wd: Path) -> dict[str, object]:
    """Both yardsticks' best pair and the mean regret against each (points) of one finished run dir."""
    params = load(wd / "params.yaml")
    o = params.optimize
    model = li_model(wd / "li", o.latency_ratio, o.pdm)
    lab = li_candidates(pd.read_parquet(wd / "li" / "heldout_curves.parquet"), o.latency_ratio, o.pdm)
    thresholds = lab.threshold.to_numpy(float)
    pools, left, chosen, ok = [], [], [], np.ones(len(thresholds), bool)
    for night in sorted(d for d in (wd / "backtest").iterdir() if (d / "policy.json").exists()):
        policy = read_policy(night / "policy.json")
        r, pool, mis, _ = night_regret(policy, wd / "li", night / "um", night / "evaluation" / "decisions.parquet",
                                       params.qos)
        history = pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet")
        li_vm, _, _ = recent_li_shares(params.with_as_of(night.name), wd / "features" / "vm_features.parquet",
                                       history, wd / "li", model, thresholds)
        ok &= admitted(li_vm, lab.called.to_numpy(), lab.errors.to_numpy(), o.confidence, o.budget)
        pools.append(pool)
        left.append(mis)
        chosen.append(r["chosen_pool"])
    got = np.array(chosen)
    out: dict[str, object] = {"run": str(wd), "nights": len(got), "admitted_thresholds": int(ok[1:].sum())}
    for name, pair in (("fixed", best_fixed(pools, left, o.budget)),
                       ("admitted", restricted_fixed(pools, left, ok, o.budget))):
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
