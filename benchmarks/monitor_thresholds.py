"""What the QoS monitor's threshold costs and buys on the fleet: recall and false alarms at other thresholds.

    python -m benchmarks.monitor_thresholds [--thresholds 0.1 0.15 0.2 0.25 0.32 0.42] BACKTEST [BACKTEST ...]

The monitor's threshold is set in the lab (``train_monitor``: at most 5% of the spill runs within the PDM flagged, at
90% confidence, over every spilled share). On the fleet the replay scores an insensitive call with all its memory on
the pool, where the calls within the PDM are mostly insensitive workloads that the model scores low. For each
finished backtest (``<backtest>/<night>/evaluation/decisions.parquet``, the served policy's decisions over the
nights' next days) and each threshold, it flags the LI calls whose recorded P(exceeds) (``p_exceed``, the monitor's
score of the call's counters under the pool) reaches it, and prints one JSON line:

- ``recall``: the share of the calls slowed past the PDM (the scorer's ``false_positive``) that are flagged;
- ``false_alarms_pct``: calls within the PDM that are flagged, as a share of all the days' VMs (what they cost of
  the monitor's capacity, ``qos.max_mitigated_share`` of a day's VMs);
- ``flagged_pct``: every flagged call, as a share of all the days' VMs.

``replay_recall`` is the replay's own flags (``seen_slowed``), at the served threshold. The scorer's truth is read
only to judge; a call without counters has no score and is never flagged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ["li_called", "false_positive", "p_exceed", "seen_slowed"]


def decisions(backtest: Path) -> pd.DataFrame:
    files = sorted(backtest.glob("*/evaluation/decisions.parquet"))
    if not files:
        raise SystemExit(f"{backtest}: no <night>/evaluation/decisions.parquet; run `pond backtest` first")
    return pd.concat([pd.read_parquet(f, columns=COLUMNS) for f in files], ignore_index=True)


def at_thresholds(d: pd.DataFrame, thresholds: list[float]) -> list[dict[str, float]]:
    called = d[d["li_called"].astype(bool)]
    slowed = called["false_positive"].astype(bool).to_numpy()
    score = called["p_exceed"].to_numpy(float)
    rows = []
    for t in thresholds:
        flag = np.nan_to_num(score, nan=-1.0) >= t
        rows.append({"threshold": t, "recall": round(float(flag[slowed].mean()), 4) if slowed.any() else None,
                     "false_alarms_pct": round(100 * float(flag[~slowed].sum()) / len(d), 4),
                     "flagged_pct": round(100 * float(flag.sum()) / len(d), 4)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backtests", type=Path, nargs="+")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.1, 0.15, 0.2, 0.25, 0.32, 0.42])
    a = ap.parse_args()
    for bt in a.backtests:
        d = decisions(bt)
        called = d[d["li_called"].astype(bool)]
        slowed = called["false_positive"].astype(bool)
        head = {"backtest": str(bt), "vms": len(d), "slowed_calls": int(slowed.sum()),
                "replay_recall": round(float(called["seen_slowed"][slowed].mean()), 4) if slowed.any() else None}
        for row in at_thresholds(d, a.thresholds):
            print(json.dumps(head | row))


if __name__ == "__main__":
    main()
