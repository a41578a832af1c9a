"""What the solver's OP curve could know the night a drift starts: per backtest night of a finished run, the next
day's overpredictions at fixed UM targets (that night's own model and offsets), among every VM whose outcome is known
at the end of the trace and among those that ended within a day of their creation.

    python -m benchmarks.analyses.op_drift /tmp/bv/seed42/pond                 # a run dir of benchmarks.backtest_variants
    python -m benchmarks.analyses.op_drift . --backtest data/backtest --raw data/raw --targets 0.05 0.075

Most VMs end within a day of their creation, so a curve that scores the last days on the VMs that have ended
(``train_um.curve_lag_days: 0``) sees a drift the night it starts, where one that ends ``calib_lag_days`` before
the night sees it days later. The table says whether the VMs that end early overpredict as the others do.
Reads the run's saved decisions and UM manifests; no model is trained again. Seconds a run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pond.models.um_curves import um_op


def drift(backtest: Path, raw: Path, targets: list[float]) -> pd.DataFrame:
    """One row per night: its next day's VMs, the share of them that ended within a day, and OP at each target among
    the VMs with a known outcome (``all``) and among those that ended within a day (``1d``)."""
    vms = pd.read_parquet(raw / "vms.parquet", columns=["vm_id", "created_at", "deleted_at", "untouched_fraction"])
    rows = []
    for night in sorted(p for p in backtest.iterdir() if (p / "evaluation" / "decisions.parquet").exists()):
        d = pd.read_parquet(night / "evaluation" / "decisions.parquet", columns=["vm_id", "um_raw", "memory_gb"])
        d = d.merge(vms, on="vm_id")
        offsets = json.loads((night / "um" / "manifest.json").read_text())["offsets"]
        u, mem, raw_pred = (d[c].to_numpy(float) for c in ("untouched_fraction", "memory_gb", "um_raw"))
        known = np.isfinite(u)
        early = known & ((d.deleted_at - d.created_at).dt.total_seconds().to_numpy() < 86_400)
        row = {"night": night.name, "vms": len(d), "ended_within_a_day": round(float(early.mean()), 4)}
        for t in targets:
            pred = np.clip(raw_pred - offsets[f"{t:g}"], 0.0, 1.0)
            for name, m in (("all", known), ("1d", early)):
                row[f"op{t:g}_{name}"] = round(float(um_op(pred[m], u[m], mem[m])[1]), 4)
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run dir (backtest/ and raw/ in it)")
    ap.add_argument("--backtest", type=Path, default=Path("backtest"), help="relative to run")
    ap.add_argument("--raw", type=Path, default=Path("raw"), help="relative to run")
    ap.add_argument("--targets", type=float, nargs="+", default=[0.05, 0.075])
    a = ap.parse_args()
    table = drift(a.run / a.backtest, a.run / a.raw, a.targets)
    print(table.to_string(index=False))
    for t in a.targets:
        gap = (table[f"op{t:g}_all"] - table[f"op{t:g}_1d"]) * 100
        print(f"OP at {t:g}: all minus ended within a day, {gap.min():+.2f} to {gap.max():+.2f} points")


if __name__ == "__main__":
    main()
