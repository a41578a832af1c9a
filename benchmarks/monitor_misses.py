"""Which slowed insensitive calls the replay's QoS monitor misses, and why, over the backtest's nights:

    python -m benchmarks.monitor_misses [--backtest data/backtest] [--raw data/raw]
                                        [--params params.yaml] [--top 10] [--oracle | --false-alarms]

For every night's next day (``<backtest>/<night>/evaluation/decisions.parquet``, the served policy's decisions) it
takes the VMs the LI model called insensitive that the scorer finds slowed past the PDM with all their memory on the
pool (``false_positive``), and the replay's flag of each (``seen_slowed``: the monitor model on its counters under the
pool, ``optimize.monitor``). Per workload it reports:

- ``calls``: its slowed calls over the nights, ``flagged``: the share the monitor flagged;
- ``mechanism``: which of the four gives it the most extra cycles on the pool (demand misses, late prefetches, page
  walks served by the pool, bandwidth queueing);
- ``truth_pct``: its slowdown with the whole footprint on the pool (the population truth, read here only to judge);
- ``visible_pct``: the part of that slowdown its counters can show, the four mechanisms' extra cycles
  (``telemetry.fleet.pool_counters.extra_cycles``) without the unexplained part ``eta`` that no counter carries
  (``truth = visible * (1 + eta)``), rebuilt from the generator's own draw (params.yaml's seed and variant).

Then one line: recall over all slowed calls (what ``backtest_variants`` reports), the share of them from the most
frequent workload, recall without it, recall counting each slowed workload once (flagged on most of its calls), and
the share of the missed calls whose visible slowdown is within 1 point of the PDM (borderline: the counters show a
slowdown at the PDM, and the rest is ``eta``), the missed calls' mean true slowdown, recall over the calls past
that border, and the misses past it by mechanism.

``--oracle`` adds what no monitor that reads counters can beat, on the same calls: a monitor that knows each call's
visible slowdown exactly and flags it where that is at least some level, set so that it flags no larger a share of
the calls within the PDM than the replay's monitor did (``oracle_recall``); and the same at the level that flags
every call whose visible slowdown is past the PDM (``visible_past_pdm_recall``, with its false alarms).

``--false-alarms`` lists instead the workloads of the calls within the PDM that the monitor flagged, most flags first
(``false_alarms``: how many; the same columns otherwise): the flags the solver charges as LI errors.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import load
from pond.telemetry.fleet import build_lab
from pond.telemetry.fleet.pool_counters import extra_cycles
from pond.telemetry.io import read_tables


def all_calls(backtest: Path) -> pd.DataFrame:
    """Every night's insensitive calls: ``vm_id``, ``slowed`` (the scorer's), ``seen_slowed`` (the monitor's flag),
    ``night``."""
    rows = []
    for path in sorted(backtest.glob("*/evaluation/decisions.parquet")):
        d = pd.read_parquet(path, columns=["vm_id", "li_called", "false_positive", "seen_slowed"])
        d = d[d.li_called.astype(bool)]
        rows.append(pd.DataFrame({"vm_id": d.vm_id, "slowed": d.false_positive.astype(bool),
                                  "seen_slowed": d.seen_slowed.astype(bool), "night": path.parent.parent.name}))
    if not rows:
        raise SystemExit(f"no nights in {backtest}: run `dvc repro backtest`")
    return pd.concat(rows, ignore_index=True)


def slowed_calls(backtest: Path) -> pd.DataFrame:
    """Every night's slowed insensitive calls: ``vm_id``, ``seen_slowed``, ``night``."""
    calls = all_calls(backtest)
    return calls.loc[calls.slowed, ["vm_id", "seen_slowed", "night"]].reset_index(drop=True)


def oracle(calls: pd.DataFrame, vms: pd.DataFrame, latent: pd.DataFrame, ratio: float, pdm: float) -> dict:
    """The recall of a monitor that knows each call's visible slowdown (module doc), against the replay's."""
    c = calls.merge(vms[["vm_id", "workload_id"]], on="vm_id", how="left")
    lat = latent.set_index("workload_id").reindex(c.workload_id)
    visible = 100.0 * pd.DataFrame(extra_cycles(lat, ratio, np.ones(len(lat)))).sum(axis=1).to_numpy()
    slowed, seen = c.slowed.to_numpy(), c.seen_slowed.to_numpy()
    within = ~slowed
    fa = float(seen[within].mean()) if within.any() else 0.0
    # the lowest level whose flags among the calls within the PDM are no more than the monitor's
    order = np.sort(visible[within])[::-1]
    allowed = int(np.floor(fa * within.sum()))
    level = order[allowed] if allowed < len(order) else -np.inf
    flag = visible > level
    past = visible > pdm
    share = lambda m, w: round(float(m[w].mean()), 4) if w.any() else None
    return {"calls": len(c), "slowed": int(slowed.sum()), "monitor_recall": share(seen, slowed),
            "monitor_false_alarms": round(fa, 4), "oracle_level_pct": round(float(level), 2),
            "oracle_recall": share(flag, slowed), "oracle_false_alarms": share(flag, within),
            "visible_past_pdm_recall": share(past, slowed), "visible_past_pdm_false_alarms": share(past, within)}


def by_workload(calls: pd.DataFrame, vms: pd.DataFrame, latent: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """One row per workload of the slowed calls (module doc), most frequent first."""
    c = calls.merge(vms[["vm_id", "workload_id"]], on="vm_id", how="left")
    per = c.groupby("workload_id").agg(calls=("vm_id", "size"), flagged=("seen_slowed", "mean"))
    lat = latent.set_index("workload_id").reindex(per.index)
    extra = pd.DataFrame(extra_cycles(lat, ratio, np.ones(len(lat))), index=per.index)
    visible = 100.0 * extra.sum(axis=1).to_numpy()
    per = per.assign(mechanism=extra.idxmax(axis=1), visible_pct=np.round(visible, 2),
                     truth_pct=np.round(visible * (1.0 + lat.eta.to_numpy(float)), 2),
                     eta=np.round(lat.eta.to_numpy(float), 3))
    return per.sort_values(["calls", "truth_pct"], ascending=[False, False])


def false_alarms(calls: pd.DataFrame, vms: pd.DataFrame, latent: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """``by_workload`` of the calls within the PDM, with the monitor's flags among them, most flags first."""
    per = by_workload(calls[~calls.slowed], vms, latent, ratio)
    per.insert(0, "false_alarms", np.round(per.calls * per.flagged).astype(int))
    return per[per.false_alarms > 0].sort_values("false_alarms", ascending=False)


def summary(per: pd.DataFrame, pdm: float) -> dict:
    """Recall four ways (module doc)."""
    n = int(per.calls.sum())
    caught = float((per.calls * per.flagged).sum())
    top, rest = per.iloc[0], per.iloc[1:]
    missed = per.calls * (1.0 - per.flagged)
    border = per.visible_pct <= pdm + 1.0
    borderline = float(missed[border].sum()) / max(float(missed.sum()), 1e-9)
    past = per[~border]
    return {"slowed_calls": n, "recall": round(caught / max(n, 1), 4), "workloads": len(per),
            "top_workload": str(per.index[0]), "top_workload_share": round(float(top.calls) / max(n, 1), 4),
            "top_workload_flagged": round(float(top.flagged), 4),
            "recall_without_top": round(float((rest.calls * rest.flagged).sum()) / max(int(rest.calls.sum()), 1), 4),
            "workload_recall": round(float((per.flagged > 0.5).mean()), 4),
            "missed_borderline_share": round(borderline, 4),
            "missed_mean_truth_pct": round(float((missed * per.truth_pct).sum()) / max(float(missed.sum()), 1e-9), 2),
            "recall_past_border": round(float((past.calls * past.flagged).sum()) / max(int(past.calls.sum()), 1), 4),
            "calls_past_border": int(past.calls.sum()),
            "missed_past_border_by_mechanism": {str(k): int(v) for k, v in
                                                missed[~border].groupby(per.mechanism[~border]).sum().round().items()}}


def workloads(backtest: Path, raw: Path, params_path: Path) -> tuple[pd.DataFrame, float]:
    """``by_workload`` of a backtest's folders, with its raw tables and params, and the PDM."""
    params = load(params_path)
    lab = build_lab(params.generate.lab, params.generate.variant)
    vms = read_tables(raw, ["vms"], validate=False)["vms"]
    return by_workload(slowed_calls(backtest), vms, lab.latent, params.optimize.latency_ratio), params.optimize.pdm


def misses(backtest: Path, raw: Path, params_path: Path) -> dict:
    """``summary`` of a backtest's folders."""
    return summary(*workloads(backtest, raw, params_path))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backtest", type=Path, default=Path("data/backtest"))
    ap.add_argument("--raw", type=Path, default=Path("data/raw"))
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--top", type=int, default=10, help="workloads to list")
    ap.add_argument("--oracle", action="store_true", help="also the recall of a monitor that knows the visible part")
    ap.add_argument("--false-alarms", action="store_true", help="list the workloads of the flags within the PDM")
    args = ap.parse_args()
    if args.false_alarms:
        params = load(args.params)
        lab = build_lab(params.generate.lab, params.generate.variant)
        vms = read_tables(args.raw, ["vms"], validate=False)["vms"]
        calls = all_calls(args.backtest)
        per = false_alarms(calls, vms, lab.latent, params.optimize.latency_ratio)
        print(per.head(args.top).to_string())
        print(json.dumps({"calls_within": int((~calls.slowed).sum()), "flagged": int(per.false_alarms.sum())}))
        return
    per, pdm = workloads(args.backtest, args.raw, args.params)
    print(per.head(args.top).to_string())
    print(json.dumps(summary(per, pdm)))
    if args.oracle:
        params = load(args.params)
        lab = build_lab(params.generate.lab, params.generate.variant)
        vms = read_tables(args.raw, ["vms"], validate=False)["vms"]
        print(json.dumps(oracle(all_calls(args.backtest), vms, lab.latent, params.optimize.latency_ratio, pdm)))


if __name__ == "__main__":
    main()
