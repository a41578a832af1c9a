"""The QoS monitor's model on the built-in fleet's pooled VMs at their own spill, beside the replay's flags, on the
backtest's nights:

    python -m benchmarks.monitor_fleet [--backtest data/backtest] [--raw data/raw] [--monitor data/models/monitor]

The replay flags an insensitive call from its counters with all its memory on the pool (the allocation the scorer
judges it at) and a zNUMA by its touch of the pool node (``optimize.monitor``, ``evaluation.qos``); this measures the
model on every pooled VM's counters at the spill it actually had. For each night's next day
(``<backtest>/<night>/evaluation/decisions.parquet``: the served policy's decisions) and each VM with memory on the
pool:

- its spill: the memory it touched beyond its local node, as a share of what it touched (``untouched_fraction``,
  or ``untouched_so_far`` for a VM still running: a lower bound of the touch), the scorer's own rule
  (``evaluation.combined``);
- whether it is slowed past the PDM there: its workload's slowdown at that spill in the population truth (the
  scorer's, read here only to judge);
- its counters under that allocation: the generator's own mechanisms (``telemetry.fleet.pool_counters``, rebuilt from
  params.yaml's seed, as `generate` drew them), its workload's rates times its first-hour counters' length, with the
  fleet's counter noise; no slowdown enters them;
- the monitor's flag: ``monitor.onnx`` on those counters and ``pool_gb / memory_gb``, at its served threshold; and the
  replay's own flag (``flagged``: a called VM the monitor flags, or a zNUMA VM that touched its pool node).

One line per night and a total: pooled VMs, those slowed past the PDM, the share of them each monitor flags, and the
share of the others each flags (false alarms); ``replay_*`` are the replay's flags.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import load
from pond.evaluation.combined import slowdown_at
from pond.evaluation.truth import truth_table
from pond.models.monitor_runtime import MonitorModel
from pond.telemetry.contract import VM_COUNTERS, event_columns
from pond.telemetry.fleet import build_lab
from pond.telemetry.fleet.pool_counters import pool_rates
from pond.telemetry.fleet.portable import exp
from pond.telemetry.io import read_tables


def night(decisions: pd.DataFrame, vms: pd.DataFrame, counters: pd.DataFrame, lab, monitor: MonitorModel,
          table: pd.DataFrame, ratio: float, pdm: float, noise: float, seed: int) -> pd.DataFrame:
    """One row per pooled VM of the day: spill, truth, both monitors' flags."""
    d = decisions[decisions.pool_gb > 0].merge(vms, on="vm_id", how="left", suffixes=("", "_vm"))
    d = d[d.workload_id.notna()].reset_index(drop=True)
    untouched = d.untouched_fraction.fillna(d.untouched_so_far).fillna(0.0).to_numpy(float)
    touched = (1.0 - untouched) * d.memory_gb.to_numpy(float)
    local = d.memory_gb.to_numpy(float) - d.pool_gb.to_numpy(float)
    spill = np.where(touched > 0, 100.0 * np.maximum(touched - local, 0.0) / np.maximum(touched, 1e-9), 0.0)
    slowdown = slowdown_at(table, d.workload_id, spill)
    idx = pd.Index(lab.latent.workload_id).get_indexer(d.workload_id)
    lat, rates = lab.latent.iloc[idx].reset_index(drop=True), lab.rates.iloc[idx].reset_index(drop=True)
    under = pool_rates(lat, rates, ratio, spill)
    cycles = counters.reindex(d.vm_id)["CPU_CLK_UNHALTED.THREAD"].to_numpy(float)
    cycles = np.where(np.isfinite(cycles), cycles, np.nanmedian(cycles))
    rng = np.random.default_rng([seed, 67])
    counts = pd.DataFrame(under.to_numpy() * cycles[:, None] * exp(rng.normal(0.0, noise, under.shape)),
                          columns=under.columns)
    events = list(under.columns)
    p = monitor.p_exceeds(counts, events, d.pool_gb.to_numpy(float) / d.memory_gb.to_numpy(float),
                          np.full(len(d), ratio))
    replay = d.flagged.to_numpy(bool)
    whole = d.pool_gb.to_numpy(float) >= d.memory_gb.to_numpy(float)          # as /v1/qos: all on the pool, a call
    at = np.where(whole, monitor.threshold(ratio, whole=True), monitor.threshold(ratio))
    return pd.DataFrame({"vm_id": d.vm_id, "called": d.li_called.to_numpy(bool), "spill_pct": spill,
                         "slowed": slowdown > pdm, "monitor": p >= at, "replay": replay})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backtest", type=Path, default=Path("data/backtest"))
    ap.add_argument("--raw", type=Path, default=Path("data/raw"))
    ap.add_argument("--monitor", type=Path, default=Path("data/models/monitor"))
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = ap.parse_args()
    params = load(args.params)
    monitor = MonitorModel.load(args.monitor)
    if monitor is None:
        raise SystemExit(f"no monitor model in {args.monitor}: run `dvc repro train_monitor`")
    lab = build_lab(params.generate.lab, params.generate.variant)
    t = read_tables(args.raw, ["vms", "vm_counters"], validate=False)
    vms = t["vms"][["vm_id", "workload_id", "untouched_fraction", "untouched_so_far"]]
    counters = t["vm_counters"].set_index("vm_id")
    assert "CPU_CLK_UNHALTED.THREAD" in event_columns(t["vm_counters"], VM_COUNTERS)
    ratio, pdm = params.optimize.latency_ratio, params.optimize.pdm
    table, _ = truth_table(args.raw, ratio)
    rows = []
    for path in sorted(args.backtest.glob("*/evaluation/decisions.parquet")):
        v = night(pd.read_parquet(path), vms, counters, lab, monitor, table, ratio, pdm,
                  params.generate.fleet.counter_noise, params.base.seed)
        rows.append(v.assign(night=path.parent.parent.name))
    if not rows:
        raise SystemExit(f"no nights in {args.backtest}: run `dvc repro backtest`")
    every = pd.concat(rows, ignore_index=True)

    def line(v: pd.DataFrame, name: str) -> dict:
        s, w = v[v.slowed], v[~v.slowed]
        share = lambda x: round(100 * float(x.mean()), 2) if len(x) else None
        return {"night": name, "pooled": len(v), "slowed": len(s), "monitor_flags_slowed_pct": share(s.monitor),
                "replay_flags_slowed_pct": share(s["replay"]), "monitor_false_alarm_pct": share(w.monitor),
                "replay_false_alarm_pct": share(w["replay"]), "called": int(v.called.sum()),
                "slowed_called": int((s.called).sum())}

    for name, v in every.groupby("night"):
        print(json.dumps(line(v, name)))
    print(json.dumps(line(every, "all")))


if __name__ == "__main__":
    main()
