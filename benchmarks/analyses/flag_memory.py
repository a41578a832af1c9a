"""The service's memory of the QoS monitor's flags, replayed over finished backtest runs:

    python -m benchmarks.analyses.flag_memory W/seed43/walks [W/seed46/pond ...] [--hours 168 ...]
                                # run dirs of benchmarks.backtest_variants; a few seconds a run and hold

Why: `backtest` replays the memory itself (``evaluation.refusal``) once its nights are done; a run made before it
did has every input the memory needs (each night's served decisions with the monitor's flags, its policy, the
day's VMs), and no night's choice depends on it, so the figures are those a new run would give. Per run and hold
(``qos.refusal_hours``; 0: never refused, each night's own figures): the nights within the budget after the monitor
(combined and served), the worst night's unmitigated share, the most mitigated, the mean pool share, the share of
VMs whose LI call was refused, and the monitor's recall on the slowed insensitive calls that are left.

``--regret``: the mean regret against the best pair fixed over the nights in hindsight and against the best the lab
admits, without and with the memory (``evaluation.refusal_nights.refusing_grids``: each candidate LI threshold's own
calls and flags refuse through the nights), with both pairs; about 2 min a run, reading the lab's admits as
``benchmarks.analyses.admissible_regret`` does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from benchmarks.analyses.admissible_regret import replayed
from pond.core.params import load
from pond.evaluation.backtest import pair, refusing_summary, with_fixed_regret
from pond.evaluation.refusal_nights import refusal_rows, refusing_grids


def one_run(run: Path, hours: float) -> tuple[pd.DataFrame, dict]:
    nights = sorted(d for d in (run / "backtest").iterdir() if (d / "evaluation" / "decisions.parquet").exists())
    if not nights:
        raise SystemExit(f"{run}: no backtest/<night>/evaluation/decisions.parquet; pass a run dir of "
                         "benchmarks.backtest_variants (<workdir>/seed<N>/<variant>)")
    p = load(run / "params.yaml")
    qos = p.qos.model_copy(update={"refusal_hours": hours})
    rows = refusal_rows(nights, run / "features" / "vm_features.parquet", run / "raw", qos,
                        p.features.counter_delay_s)
    rows.insert(0, "budget", [json.loads((n / "evaluate.json").read_text())["budget"] for n in nights])
    rows.insert(0, "night", [n.name for n in nights])
    return rows, refusing_summary(rows)["refusing"]


def regrets(run: Path, hours: float) -> str:
    """Mean regret (points) against the best fixed pair and the lab's, without the memory and with it."""
    base = replayed(run)
    p = base.params
    qos = p.qos.model_copy(update={"refusal_hours": hours})
    grids, chosen = refusing_grids(base.nights, run / "li", run / "features" / "vm_features.parquet", qos,
                                   p.features.counter_delay_s)
    out = []
    for name, gs, picks in (("no memory", base.grids, None), (f"{hours:g} h", grids, chosen)):
        chosen_pool = [r["chosen_pool"] for r in base.regrets] if picks is None else \
            [float(g[0][c]) for g, c in zip(grids, picks, strict=True)]
        table = pd.DataFrame({"budget": p.optimize.budget, "chosen_pool": chosen_pool})
        nights, fixed, admitted = with_fixed_regret(table, gs, base.admits)
        th = {k: None if at is None else pair(base.candidates, at) for k, at in (("fixed", fixed), ("lab", admitted))}
        out.append(f"{name}: chosen pool {100 * table.chosen_pool.mean():.2f}%, regret "
                   f"{100 * nights.regret_fixed.mean():.2f} vs the best fixed pair {th['fixed']}, "
                   f"{100 * nights.regret_admitted.mean():.2f} vs the lab's {th['lab']}")
    return f"{run} regret: " + "; ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--hours", type=float, nargs="+", default=[0.0, 168.0])
    ap.add_argument("--nights", action="store_true", help="print every night's row too")
    ap.add_argument("--regret", action="store_true", help="and the regret without and with the memory (last hold)")
    args = ap.parse_args()
    for run in args.runs:
        for hours in args.hours:
            rows, m = one_run(run, hours)
            if args.nights:
                print(rows.round(5).to_string(index=False))
            recall = "n/a" if m["monitor_recall"] is None else f"{m['monitor_recall']:.1%}"
            print(f"{run} hold {hours:g} h: budget kept on {m['nights_within_budget']}/{len(rows)} nights (served "
                  f"{m['served_nights_within_budget']}), worst {100 * m['realized_unmitigated_max']:.2f}% left "
                  f"slowed, mitigations at most {100 * m['mitigations_max']:.2f}%, pool {100 * m['realized_pool_mean']:.2f}%, "
                  f"{100 * m['refused_calls_mean']:.2f}% of VMs refused, monitor recall {recall} of "
                  f"{m['monitor_slowed_calls']} slowed calls", flush=True)
        if args.regret:
            print(regrets(run, args.hours[-1]), flush=True)


if __name__ == "__main__":
    main()
