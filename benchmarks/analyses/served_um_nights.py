"""Does the served UM-only policy's evidence bound its next day? After `benchmarks/backtest_variants.py`:

    python -m benchmarks.analyses.served_um_nights [--workdir /tmp/pond-backtest-variants] [--variants pond walks]

The served policy (``optimize.serve: um_only``) takes the largest UM target whose ``optimize.confidence`` quantile of
tonight's OP, predicted from the UM backtest nights (each night's `um/heldout_nights.parquet`, outcomes known by its
as-of; `optimize.solver.next_night`), is within the budget. Per backtest night this prints that target, the OP the
nights it read realized at it (how many, mean, their own quantile, max), the next day's realized OP
(`evaluate.json`, served), and how the same backtest nights look once every outcome is known (the last night's
file): is the evidence biased by the VMs still running at as-of, or does OP move between nights (its trend at a 2%
target over the last night's UM backtest nights)? Then the UM-only choice again, night by night, with the solver's
own evidence (as the run's params say), with those nights' OP once known (the censoring removed, in hindsight), with
the past nights' own quantile (at 0.9 and at the run's level; the solver before the trend drew it from 4,000
resampled nights, so it can differ on a night near the budget) and with a prediction bound for one more night that
ignores the trend, each judged on the next day's VMs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.analyses.regret_anatomy import replay, variants_cli, with_confidence
from pond.optimize.solver import best, next_night
from pond.optimize.tonight import um_candidates


def served_nights(wd: Path) -> None:
    nights = sorted(d for d in (wd / "backtest").iterdir() if (d / "policy.json").exists())
    first = json.loads((nights[0] / "policy.json").read_text())
    level, budget = first["confidence"], first["misprediction_budget"]
    later = pd.read_parquet(nights[-1] / "um" / "heldout_nights.parquet")
    rows = []
    for night in nights:
        policy = json.loads((night / "policy.json").read_text())
        target = policy.alternatives["um_only"].um_target_op
        read = pd.read_parquet(night / "um" / "heldout_nights.parquet")
        op = read.loc[np.isclose(read.target_op, target), ["as_of", "op"]]
        known = later[np.isclose(later.target_op, target) & later.as_of.isin(op.as_of)]
        served = json.loads((night / "evaluate.json").read_text())["served"]
        rows.append({"night": night.name, "target": target, "nights_read": len(op), "op_mean": op.op.mean(),
                     f"op_q{level:g}": np.quantile(op.op, level) if level is not None else np.nan,
                     "op_max": op.op.max(), "same_nights_known_later": known.op.mean(),
                     "next_day": served["mispredictions_conservative"]})
    df = pd.DataFrame(rows)
    print(f"{wd}: next day over the budget on {(df.next_day > budget + 1e-12).sum()} of {len(df)} nights; OP of the "
          f"nights read {100 * df.op_mean.mean():.2f}% on average, the same nights once known "
          f"{100 * df.same_nights_known_later.mean():.2f}%, next days {100 * df.next_day.mean():.2f}%")
    print((df.set_index("night") * 1).round(4).to_string())
    trend(later)
    resolve(wd, later)


def trend(nights: pd.DataFrame, target: float = 0.02) -> None:
    """OP at one UM target across the UM backtest nights of the last night: does it move over the trace?"""
    x = nights[np.isclose(nights.target_op, target)].sort_values("as_of")
    days = (pd.to_datetime(x.as_of) - pd.to_datetime(x.as_of).min()).dt.days.to_numpy()
    slope = 7 * np.polyfit(days, x.op.to_numpy(), 1)[0] if len(x) > 1 else float("nan")
    print(f"  OP at target {target:g} over the {len(x)} UM backtest nights of the last night: first five "
          f"{100 * x.op.head(5).mean():.2f}%, last five {100 * x.op.tail(5).mean():.2f}%, "
          f"least-squares trend {100 * slope:+.2f} points a week")


def bound_choice(um_nights: pd.DataFrame, level: float, budget: float, past_quantile: bool) -> int:
    """The UM target (index into `um_candidates`, 0 = off) with the most UM whose bound is within the budget: the
    nights' own ``level`` quantile (``past_quantile``), or the solver's prediction without the trend (the nights'
    mean + t(n - 1) s sqrt(1 + 1/n): `optimize.solver.next_night` without days)."""
    _, um, op = um_candidates(um_nights)
    bound = np.quantile(op, level, axis=1) if past_quantile else next_night(op).quantile(level)
    return best(um.mean(axis=1)[None, :], bound[None, :], budget)[1]   # row 0, UM off, is always within


def resolve(wd: Path, later: pd.DataFrame) -> None:
    """The UM-only choice with other evidence or another confidence, realized on each next day."""
    r = replay(wd)
    got: dict[str, list[float]] = {}
    for night in r.nights:
        um = night.um_nights
        known = um[["as_of", "target_op"]].merge(later[["as_of", "target_op", "op"]], on=["as_of", "target_op"],
                                                 how="left").op
        level = night.params.optimize.confidence
        for name, params, nights in (
                (f"the solver's prediction at {level:g}", night.params, um),
                ("the same, with the nights' OP once known", night.params,
                 um.assign(op=known.fillna(um.op).to_numpy())),
                ("the same at 0.9", with_confidence(night.params, 0.9), um)):
            got.setdefault(name, []).append(r.resolve_um_only(night, params, nights)[1])
        for name, lv, past in (("the past nights' own 0.9 quantile, interpolated", 0.9, True),
                               (f"the past nights' {level:g} quantile", level, True),
                               (f"a {level:g} prediction bound without the trend", level, False)):
            got.setdefault(name, []).append(float(night.mis[0, bound_choice(um, lv, r.budget, past)]))
    for name, m in got.items():
        m = np.array(m)
        print(f"  UM only, {name}: {(m <= r.budget + 1e-12).sum()} of {len(m)} next days within the budget, "
              f"worst {100 * m.max():.2f}%")


if __name__ == "__main__":
    variants_cli(__doc__, served_nights)
