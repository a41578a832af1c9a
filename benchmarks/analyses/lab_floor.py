"""What keeps the QoS monitor's evidence from admitting the best fixed pair in hindsight. Per finished backtest run,
at that pair's LI threshold and at the admitted pair's, over the replayed nights' next days (no model is trained):

    python -m benchmarks.analyses.lab_floor /tmp/bv/seed4*/*       # run dirs of benchmarks.backtest_variants

- the lab's out-of-fold counts there (workloads called, errors) and the rate the solver charges from them (Jeffreys
  mean and its ``optimize.confidence`` quantile): the floor, since the fleet's evidence may only raise it;
- the monitor's view of the fleet there: the share of the called VMs it flags, divided by its recall near the
  threshold among the lab's own LI errors (``optimize.monitor.nearest_counts``, what the solver divides by);
- the truth the monitor never reads: the share of the called VMs slowed past the PDM, and the share of those the
  monitor flags (its recall on the fleet);
- each times the share of VMs called there: the LI errors the budget would be charged (the lab's at its mean and at
  its bound; the monitor's and the truth's at their mean), against ``optimize.budget``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pond.core.params import load
from pond.models.monitor_runtime import MonitorModel
from pond.optimize.monitor import nearest_counts
from pond.optimize.solver import error_rate
from pond.optimize.tonight import li_candidates


def next_days(wd: Path, threshold: float) -> dict[str, float]:
    """Over the saved nights' next days, among the VMs with history called at ``threshold``: the share of VMs called,
    the monitor's flag rate, the slowed share (truth) and the monitor's recall among them (pooled over the days)."""
    rows = []
    for night in sorted((wd / "backtest").iterdir()):
        path = night / "evaluation" / "decisions.parquet"
        if not path.exists():
            continue
        d = pd.read_parquet(path, columns=["has_history", "p_insensitive", "sensitive", "seen_slowed"])
        called = d.has_history.to_numpy(bool) & (d.p_insensitive.to_numpy(float) >= threshold)
        slowed = d.sensitive.to_numpy(float) > 0
        flagged = d.seen_slowed.to_numpy(bool)
        rows.append((len(d), called.sum(), (called & flagged).sum(), (called & slowed).sum(),
                     (called & slowed & flagged).sum()))
    vms, called, flagged, slowed, caught = np.asarray(rows, float).sum(axis=0)
    return {"called_share": called / vms, "flag_rate": flagged / max(called, 1.0),
            "slowed_rate": slowed / max(called, 1.0), "fleet_recall": caught / max(slowed, 1.0)}


def at_threshold(wd: Path, threshold: float) -> dict[str, float]:
    """The lab's floor, the monitor's estimate and the truth at ``threshold`` (module doc), in percent."""
    params = load(wd / "params.yaml")
    o = params.optimize
    lab = li_candidates(pd.read_parquet(wd / "li" / "heldout_curves.parquet"), o.latency_ratio, o.pdm)
    i = int(np.argmin(np.abs(lab.threshold.to_numpy(float) - threshold)))
    k, m = float(lab.errors.iloc[i]), float(lab.called.iloc[i])
    scores = pd.read_parquet(wd / "li" / "heldout_scores.parquet")
    scores = scores[np.isclose(scores.latency_ratio, o.latency_ratio) & np.isclose(scores.pdm, o.pdm)]
    monitor = MonitorModel.load(wd / "monitor")
    near = nearest_counts(scores, monitor.flag_shares(o.latency_ratio) if monitor else None,
                          np.array([threshold]), o.recall_errors)
    divisor = float((near[0][0] + 0.5) / (near[1][0] + 1.0)) if near is not None else float("nan")
    fleet = next_days(wd, threshold)
    level = o.confidence or 0.5
    lab_mean = float(error_rate(np.array([m]), np.array([k]))[0])
    lab_bound = float(stats.beta.ppf(level, k + 0.5, m - k + 0.5))
    monitor_rate = fleet["flag_rate"] / divisor
    li = fleet["called_share"]
    return {"lab": f"{k:g} of {m:g}", "lab_rate": 100 * lab_mean, "lab_bound": 100 * lab_bound,
            "monitor_rate": 100 * monitor_rate, "slowed_rate": 100 * fleet["slowed_rate"],
            "divisor": 100 * divisor, "fleet_recall": 100 * fleet["fleet_recall"], "called": 100 * li,
            "charged_lab_mean": 100 * li * lab_mean, "charged_lab": 100 * li * lab_bound, "charged_monitor": 100 * li * monitor_rate,
            "charged_truth": 100 * li * fleet["slowed_rate"], "budget": 100 * o.budget}


def measure(wd: Path) -> list[dict[str, object]]:
    """Both pairs' LI thresholds of one run (metrics/backtest.json), each with ``at_threshold``'s figures."""
    import json

    m = json.loads((wd / "metrics" / "backtest.json").read_text())
    out = []
    for name in ("best_fixed_pair", "best_admitted_pair"):
        t = (m.get(name) or {}).get("li_threshold")
        if t is None:
            continue
        out.append({"run": f"{wd.parent.name}/{wd.name}", "pair": name.split("_")[1], "threshold": t,
                    "um_target": m[name]["um_target_op"], **at_threshold(wd, float(t))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run dirs (params.yaml, li, monitor, backtest, metrics)")
    a = ap.parse_args()
    table = pd.DataFrame([row for wd in a.runs for row in measure(wd)])
    print(table.round(2).to_string(index=False))


if __name__ == "__main__":
    main()
