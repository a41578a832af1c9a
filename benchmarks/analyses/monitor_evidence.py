"""How well the QoS monitor's flags stand for the LI error rate on the fleet (optimize.monitor), measured on a
backtest's nights, where each next day's VMs carry their truth:

    python -m benchmarks.analyses.monitor_evidence                       # data/backtest (dvc repro's nights)
    python -m benchmarks.analyses.monitor_evidence /tmp/pond-bv-43m/pond/data/backtest --thresholds 0.6 0.8
    python -m benchmarks.analyses.monitor_evidence /tmp/bv/seed4*/*/backtest --chosen   # one row per run

Per night and LI threshold, among the VMs with history the night's model calls insensitive (P >= threshold): how
many, the share truly sensitive, the share the monitor flags (own counters, P(exceed) >= --qos), and flags over
truth. The solver never sees the truth column; this script is the only reader of both.

``--chosen``: per backtest (several may be given), at the LI threshold each night's policy chose, the error rate
the solver charged for it (the mean and, from ``fp_bound``, its ``optimize.confidence`` quantile) beside the fleet's
truth and the monitor's flags among the VMs it called, averaged over the nights: is the lab's bound above the fleet's
rate, and would the flags have said so?
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def rates(decisions: pd.DataFrame, thresholds: list[float], qos: float) -> pd.DataFrame:
    d = decisions[decisions.has_history.to_numpy(bool) & decisions.sensitive.notna().to_numpy()]
    rows = []
    for t in thresholds:
        called = d[d.p_insensitive.to_numpy(float) >= t]
        truth = float(called.sensitive.astype(float).mean()) if len(called) else np.nan
        flags = float((called.p_exceed.to_numpy(float) >= qos).mean()) if len(called) else np.nan
        rows.append({"threshold": t, "called": len(called), "truth_pct": 100 * truth, "flags_pct": 100 * flags,
                     "flags_over_truth": flags / truth if truth else np.nan})
    return pd.DataFrame(rows)


def chosen(decisions: pd.DataFrame, li: dict, qos: float) -> dict[str, float]:
    """One night at its policy's LI threshold (``li``: policy.json's ``li``): the share of VMs called, the rate
    charged (mean, bound) and, among the called VMs with truth, the share sensitive and the share flagged."""
    with np.errstate(invalid="ignore"):
        called = decisions.has_history.to_numpy(bool) & (decisions.p_insensitive.to_numpy(float) >= li["threshold"])
    r = rates(decisions, [li["threshold"]], qos).iloc[0]
    return {"called_pct": 100 * called.mean(), "charged_pct": 100 * li["error_rate"],
            "bound_pct": 100 * li["fp_bound"] / li["expected_li"] if li["expected_li"] else np.nan,
            "truth_pct": float(r.truth_pct), "flags_pct": float(r.flags_pct)}


def chosen_table(backtests: list[Path], qos: float) -> pd.DataFrame:
    """``chosen`` averaged over each backtest's nights with LI on; one row per backtest."""
    rows = []
    for bt in backtests:
        nights = []
        for f in sorted(bt.glob("*/policy.json")):
            li = json.loads(f.read_text())["li"]
            if li["threshold"] is None:
                continue
            d = pd.read_parquet(f.parent / "evaluation" / "decisions.parquet",
                                columns=["has_history", "sensitive", "p_insensitive", "p_exceed"])
            nights.append(chosen(d, li, qos) | {"threshold": li["threshold"]})
        if nights:
            rows.append({"backtest": str(bt), "nights": len(nights), **pd.DataFrame(nights).mean().to_dict()})
    table = pd.DataFrame(rows)
    return table.assign(flags_over_truth=table.flags_pct / table.truth_pct) if len(table) else table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backtest", nargs="*", type=Path, default=[Path("data/backtest")])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9])
    ap.add_argument("--qos", type=float, default=0.5)
    ap.add_argument("--chosen", action="store_true", help="one row per backtest at each night's chosen threshold")
    a = ap.parse_args()
    if a.chosen:
        table = chosen_table(a.backtest, a.qos)
        if not len(table):
            raise SystemExit("no night with LI on (*/policy.json) under the backtests given: run a backtest first")
        print(table.round(3).to_string(index=False))
        return
    if len(a.backtest) != 1:
        raise SystemExit("give one backtest dir, or --chosen for one row per backtest")
    out = []
    for f in sorted(a.backtest[0].glob("*/evaluation/decisions.parquet")):
        cols = ["has_history", "sensitive", "p_insensitive", "p_exceed"]
        out.append(rates(pd.read_parquet(f, columns=cols), a.thresholds, a.qos).assign(night=f.parents[1].name))
    if not out:
        raise SystemExit(f"no */evaluation/decisions.parquet under {a.backtest[0]}: run a backtest first")
    table = pd.concat(out)
    print(table.pivot(index="night", columns="threshold", values=["truth_pct", "flags_pct"]).round(2).to_string())
    total = table.assign(t=table.truth_pct * table.called, f=table.flags_pct * table.called).groupby("threshold")
    pooled = (total.f.sum() / total.t.sum()).round(2)
    print("flags over truth, all nights pooled, by threshold:", pooled.to_dict())
    ratio = table.flags_over_truth.replace([np.inf], np.nan).dropna()
    print(f"per night and threshold: flags over truth from {ratio.min():.2f} to {ratio.max():.2f} "
          f"(median {ratio.median():.2f}) over {len(ratio)} cells")


if __name__ == "__main__":
    main()
