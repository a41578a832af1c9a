"""What the QoS monitor's threshold costs and buys on the fleet: recall and false alarms at other thresholds.

    python -m benchmarks.monitor_thresholds [--thresholds 0.1 0.15 0.2 0.25 0.32 0.42] [--capacity] BACKTEST [...]

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

A flag only helps if the monitor can act on it: it mitigates at most ``qos.max_mitigated_share`` of a day's VMs
(``--share``, else the run's ``params.yaml`` beside ``BACKTEST``, else the repository's), its flagged calls and its
overpredicted zNUMAs (which touch their pool node) in order of creation (``evaluation.qos.watch``). ``--capacity``
replays that per night and prints, per threshold and for the replay's own flags (``"threshold": "served"``):

- ``mitigated_recall``: the share of the slowed calls the monitor flagged *and* mitigated;
- ``nights_full``: the nights whose flags reach the capacity (the replay's own flags: ``touches_pct`` of every flag
  are overpredicted zNUMAs, ``slowed_pct`` slowed calls, the rest calls within the PDM);

and a threshold sized to the capacity (``"threshold": "sized"``), with hindsight no monitor has: each night, the
replay's flags plus those of the lowest threshold listed whose flags still fit that day's capacity (never fewer
flags than the replay's). It bounds what any threshold sized on the recent days' flags could add.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import load
from pond.evaluation.qos import watch

COLUMNS = ["li_called", "false_positive", "p_exceed", "seen_slowed"]
WATCHED = [*COLUMNS, "pool_gb", "overpredicted", "sensitive", "created_at"]


def decisions(backtest: Path) -> pd.DataFrame:
    files = sorted(backtest.glob("*/evaluation/decisions.parquet"))
    if not files:
        raise SystemExit(f"{backtest}: no <night>/evaluation/decisions.parquet; run `pond backtest` first")
    return pd.concat([pd.read_parquet(f, columns=COLUMNS) for f in files], ignore_index=True)


def nights(backtest: Path) -> list[pd.DataFrame]:
    """Each night's next day, the columns the monitor's replay reads."""
    return [pd.read_parquet(f, columns=WATCHED) for f in sorted(backtest.glob("*/evaluation/decisions.parquet"))]


def capacity_share(backtest: Path, given: float | None) -> float:
    """``--share``, else the run's params (``params.yaml`` beside the backtest, else the repository's)."""
    if given is not None:
        return given
    params = backtest.parent / "params.yaml"
    return load(params if params.exists() else Path("params.yaml")).qos.max_mitigated_share


def acted(night: pd.DataFrame, seen: np.ndarray, share: float) -> dict[str, int]:
    """What the monitor of ``evaluation.qos.watch`` does on one day with the calls flagged where ``seen``."""
    w = watch(night, seen, night["created_at"].to_numpy(), share)
    called = night["li_called"].to_numpy(bool) & (night["pool_gb"].to_numpy(float) > 0)
    slowed = called & night["false_positive"].to_numpy(bool)
    flagged, mitigated = w["flagged"].to_numpy(bool), w["mitigated"].to_numpy(bool)
    return {"slowed": int(slowed.sum()), "slowed_mitigated": int((slowed & mitigated).sum()),
            "flags": int(flagged.sum()), "touches": int((flagged & ~called).sum()),
            "slowed_flags": int((flagged & slowed).sum()),
            "full": int(flagged.sum() >= np.floor(share * len(night) + 1e-9)),
            "fits": int(flagged.sum() <= np.floor(share * len(night) + 1e-9))}


def score_flags(night: pd.DataFrame, threshold: float) -> np.ndarray:
    return np.nan_to_num(night["p_exceed"].to_numpy(float), nan=-1.0) >= threshold


def under_capacity(days: list[pd.DataFrame], thresholds: list[float], share: float) -> list[dict[str, object]]:
    """Per threshold, the replay's own flags and the hindsight-sized threshold: what the capacity lets the monitor
    mitigate (module doc)."""
    def row(label: object, per: list[dict[str, int]]) -> dict[str, object]:
        tot = {k: sum(p[k] for p in per) for k in per[0]}
        out = {"threshold": label, "nights": len(per), "nights_full": tot["full"],
               "mitigated_recall": round(tot["slowed_mitigated"] / tot["slowed"], 4) if tot["slowed"] else None}
        if label == "served":
            out |= {"touches_pct": round(100 * tot["touches"] / max(tot["flags"], 1), 1),
                    "slowed_pct": round(100 * tot["slowed_flags"] / max(tot["flags"], 1), 1)}
        return out

    served = [n["seen_slowed"].to_numpy(bool) for n in days]
    rows = [row("served", [acted(n, s, share) for n, s in zip(days, served, strict=True)])]
    rows += [row(t, [acted(n, score_flags(n, t), share) for n in days]) for t in thresholds]
    sized = []
    for n, s in zip(days, served, strict=True):
        best = acted(n, s, share)
        for t in sorted(thresholds, reverse=True):          # lower thresholds flag more
            got = acted(n, s | score_flags(n, t), share)
            if got["fits"]:
                best = got
        sized.append(best)
    return [*rows, row("sized", sized)]


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
    ap.add_argument("--capacity", action="store_true", help="what the monitor can mitigate of its flags (module doc)")
    ap.add_argument("--share", type=float, default=None, help="the capacity (default: the run's params)")
    a = ap.parse_args()
    for bt in a.backtests:
        d = decisions(bt)
        called = d[d["li_called"].astype(bool)]
        slowed = called["false_positive"].astype(bool)
        head = {"backtest": str(bt), "vms": len(d), "slowed_calls": int(slowed.sum()),
                "replay_recall": round(float(called["seen_slowed"][slowed].mean()), 4) if slowed.any() else None}
        for row in at_thresholds(d, a.thresholds):
            print(json.dumps(head | row))
        if a.capacity:
            share = capacity_share(bt, a.share)
            for row in under_capacity(nights(bt), a.thresholds, share):
                print(json.dumps(head | {"capacity_share": share} | row))


if __name__ == "__main__":
    main()
