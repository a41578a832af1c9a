"""How many of the served policy's slowed insensitive calls belong to a customer and VM type whose earlier VM the QoS
monitor had already flagged, night by night over finished backtest runs:

    python -m benchmarks.analyses.flagged_groups W/seed43/walks [W/seed46/pond ...] [--lag-hours 1]
                                # run dirs of benchmarks.backtest_variants; seconds a run

Why: a deployment's VMs share a customer, a VM type and a workload, so an LI call that is wrong for one VM is wrong
for the next hundred, and at 16,000 VMs a day one deployment can put more slowed VMs on the pool in a day than the
monitor may move back (1% of the day's VMs). Per night (``<run>/backtest/<night>/evaluation/decisions.parquet``,
the served policy's decisions on the night's next day, joined with ``<run>/raw`` for customer and VM type):

- ``calls``: the VMs called insensitive; ``slowed``: those the scorer finds slowed past the PDM (``false_positive``);
- ``slowed_of_flagged``: the slowed calls created at least ``--lag-hours`` after the monitor flagged an earlier LI
  call of the same customer and VM type (its counters under the pool are an hour's: the flag comes then), within
  the run's replayed days (the first night sees only its own day, so early nights undercount); ``--nightly``: only
  a flag of an earlier day counts, as a list the nightly job hands the service would hold;
- ``calls_of_flagged``: every insensitive call of such a group, what a service that refused the LI call to a
  flagged group would give up;
- ``slowed_left_pct``: the slowed calls that would be left, per cent of the day's VMs, beside ``slowed_pct`` now;
- ``pool_gb``, ``pool_gb_of_flagged``, ``pool_of_flagged_pct``: the day's pool GB, the part those calls hold and
  its share: at most what refusing them gives up (a refused call keeps the UM split's zNUMA node).

It reads the replay's flags and the scorer's truth only to count; no model runs. A refused call would still get
Pond's UM split (a zNUMA node), whose touches are not counted here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from pond.telemetry.io import read_tables


def groups_flagged_before(d: pd.DataFrame, lag: pd.Timedelta, nightly: bool = False) -> pd.Series:
    """Per decision (``created_at``, ``group``, ``li_called``, ``flagged``), whether an LI call of its group was
    flagged at least ``lag`` before it was created; ``nightly``: flagged on an earlier day, as a list the nightly
    job hands the service would know it."""
    flags = d.loc[d.li_called & d.flagged, ["group", "created_at"]]
    at = flags.created_at + lag
    flags = flags.assign(flag_at=at.dt.floor("D") + pd.Timedelta(days=1) if nightly else at)
    flags = flags[["group", "flag_at"]].sort_values("flag_at")
    left = d[["group", "created_at"]].reset_index().sort_values("created_at")
    got = pd.merge_asof(left, flags, left_on="created_at", right_on="flag_at", by="group", direction="backward")
    return got.set_index("index").flag_at.notna().reindex(d.index)


def one_run(run: Path, lag_hours: float, nightly: bool = False) -> pd.DataFrame:
    vms = read_tables(run / "raw", ["vms"])["vms"][["vm_id", "customer_id", "vm_type"]]
    nights = sorted((run / "backtest").glob("*/evaluation/decisions.parquet"))
    if not nights:
        raise SystemExit(f"{run}: no backtest/<night>/evaluation/decisions.parquet; pass a run dir of "
                         "benchmarks.backtest_variants (<workdir>/seed<N>/<variant>)")
    d = pd.concat([pd.read_parquet(n).assign(night=n.parents[1].name) for n in nights], ignore_index=True)
    d = d.merge(vms, on="vm_id", how="left")
    d["group"] = d.customer_id.astype(str) + "|" + d.vm_type.astype(str)
    d["seen"] = groups_flagged_before(d, pd.Timedelta(hours=lag_hours), nightly)
    slowed = d.li_called & d.false_positive
    per = pd.DataFrame({"vms": d.groupby("night").size(),
                        "calls": d[d.li_called].groupby("night").size(),
                        "slowed": d[slowed].groupby("night").size(),
                        "slowed_of_flagged": d[slowed & d.seen].groupby("night").size(),
                        "calls_of_flagged": d[d.li_called & d.seen].groupby("night").size()}).fillna(0).astype(int)
    per["pool_gb"] = d.groupby("night").pool_gb.sum().round(1)
    per["pool_gb_of_flagged"] = d[d.li_called & d.seen].groupby("night").pool_gb.sum().reindex(
        per.index, fill_value=0.0).round(1)
    per["pool_of_flagged_pct"] = (100 * per.pool_gb_of_flagged / per.pool_gb.where(per.pool_gb > 0)).round(2)
    per["slowed_pct"] = (100 * per.slowed / per.vms).round(2)
    per["slowed_left_pct"] = (100 * (per.slowed - per.slowed_of_flagged) / per.vms).round(2)
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="+")
    ap.add_argument("--lag-hours", type=float, default=1.0)
    ap.add_argument("--nightly", action="store_true", help="a group counts from the day after its flag on")
    args = ap.parse_args()
    for run in args.runs:
        per = one_run(run, args.lag_hours, args.nightly)
        print(f"{run}\n{per.to_string()}")
        t = per[["slowed", "slowed_of_flagged", "calls", "calls_of_flagged", "pool_gb", "pool_gb_of_flagged"]].sum()
        print(f"total: {t.slowed} slowed calls, {t.slowed_of_flagged} ({100 * t.slowed_of_flagged / max(t.slowed, 1):.1f}%)"
              f" of a group flagged before; {t.calls_of_flagged} of {t.calls} calls"
              f" ({100 * t.calls_of_flagged / max(t.calls, 1):.1f}%) of such groups, holding"
              f" {100 * t.pool_gb_of_flagged / max(t.pool_gb, 1e-9):.1f}% of the pool GB (at most"
              f" {per.pool_of_flagged_pct.max():.1f}% of a night's); worst night now"
              f" {per.slowed_pct.max():.2f}% of VMs slowed, {per.slowed_left_pct.max():.2f}% left\n", flush=True)


if __name__ == "__main__":
    main()
