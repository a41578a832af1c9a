"""How well the QoS monitor's flags stand for the LI error rate on the fleet (optimize.monitor), measured on a
backtest's nights, where each next day's VMs carry their truth:

    python -m benchmarks.analyses.monitor_evidence                       # data/backtest (dvc repro's nights)
    python -m benchmarks.analyses.monitor_evidence /tmp/pond-bv-43m/pond/data/backtest --thresholds 0.6 0.8

Per night and LI threshold, among the VMs with history the night's model calls insensitive (P >= threshold): how
many, the share truly sensitive, the share the monitor flags (own counters, P(exceed) >= --qos), and flags over
truth. The solver never sees the truth column; this script is the only reader of both.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backtest", nargs="?", type=Path, default=Path("data/backtest"))
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9])
    ap.add_argument("--qos", type=float, default=0.5)
    a = ap.parse_args()
    out = []
    for f in sorted(a.backtest.glob("*/evaluation/decisions.parquet")):
        cols = ["has_history", "sensitive", "p_insensitive", "p_exceed"]
        out.append(rates(pd.read_parquet(f, columns=cols), a.thresholds, a.qos).assign(night=f.parents[1].name))
    if not out:
        raise SystemExit(f"no */evaluation/decisions.parquet under {a.backtest}: run a backtest first")
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
