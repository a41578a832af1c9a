"""The QoS monitor's model on fewer counters: does it need the lab's 134 events, or do a dozen do?

    python -m benchmarks.monitor_counters [--raw data/raw] [--params params.yaml] [--sets all tma memory12]

CAMP (ASPLOS'26) estimates a workload's slowdown on CXL from at most 12 counters; `train_monitor` reads every event
the lab records. This trains and judges the monitor's model exactly as `train_monitor` does (``models.monitor_train``:
five folds of held-out workloads, each threshold set on the training workloads' own out-of-fold scores, at most
``train_monitor.max_false_alarm`` false alarms at ``fa_confidence``), on each set of inputs:

- ``all``: the stage's inputs, every event's rate per cycle, the TMA metrics and the allocation;
- ``tma``: the TMA metrics only (the 16 events they are computed from) and the allocation, Pond's production
  features;
- ``memory12``: the 12 memory events `train_monitor` reads by default (``core.params.MONITOR_EVENTS``), chosen
  before looking at any result for the ways a pool slows a workload (demand misses that wait longer, occupancy,
  prefetches, page walks, remote DRAM traffic, bandwidth): their rates, the DRAM-bound stalls, L3 miss latency and
  MLP they give, and the allocation.

Prints one JSON line per set and latency ratio: held-out recall and false alarms, the slowdown estimate within 10
points (all runs and whole footprint on the pool), the number of events read and of inputs, and the seconds it took.
Beside them, the threshold the same rule sets on every workload's held-out scores, over every spilled share (what
`train_monitor` serves) and over the full-pool runs alone (the allocation the replay judges an insensitive call at).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pond.core.params import MONITOR_EVENTS, load
from pond.features.tma import REQUIRED_EVENTS, TMA_COLUMNS, pmu_features
from pond.models.li import li_feature_names
from pond.models.monitor import flag_threshold, spill_runs
from pond.models.monitor_features import ALLOCATION, monitor_events, monitor_feature_names, monitor_features
from pond.models.monitor_train import estimate, figures, heldout, lab_for
from pond.telemetry.contract import WORKLOADS, event_columns
from pond.telemetry.io import read_tables


def inputs(events: list[str], which: str) -> tuple[list[str], int]:
    """The model's input columns for a set, LI features first as ``lab_for`` expects, and the events they read."""
    if which == "all":
        return monitor_feature_names(events), len(events)
    if which == "tma":
        return [*TMA_COLUMNS, *ALLOCATION], len(REQUIRED_EVENTS)
    if which == "memory12":
        read, missing = monitor_events(MONITOR_EVENTS, events)
        if missing:
            raise SystemExit(f"workloads table: no column {missing[0]!r}; the memory12 set needs all of "
                             f"{MONITOR_EVENTS}")
        return monitor_feature_names(read), len(read)
    raise SystemExit(f"--sets: unknown set {which!r}; expected all, tma or memory12")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path, default=Path("data/raw"))
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--sets", nargs="+", default=["all", "tma", "memory12"])
    a = ap.parse_args()
    params = load(a.params)
    p, seed = params.train_monitor, params.base.seed
    tables = read_tables(a.raw, ["workloads", "slowdowns", "spill_counters"])
    events = event_columns(tables["workloads"], WORKLOADS)
    runs = spill_runs(tables["spill_counters"], tables["slowdowns"], p.pdm)
    features = monitor_features(runs, events, runs.spilled_pct / 100.0, runs.latency_ratio)
    local = pmu_features(tables["workloads"], events, "workloads").set_index(
        tables["workloads"].workload_id.astype(str))
    for which in a.sets:
        names, n_events = inputs(events, which)
        start = time.perf_counter()
        lab = lab_for(runs, features, names, li_feature_names(features), local, tables["slowdowns"], p)
        h = heldout(lab, p, seed)
        scores, flags = h.scores, h.flags
        metrics, _ = figures(lab, scores, flags, p)
        error = abs(estimate(lab, p, seed) - lab.slowdown)
        for r in p.latency_ratios:
            judged = (abs(lab.ratio - r) < 1e-9) & (lab.spilled > 0)
            full = judged & (lab.spilled >= 100.0)
            at = {name: round(float(flag_threshold(scores["monitor"][m], lab.exceeds[m], p.max_false_alarm,
                                                   p.fa_confidence)), 3)
                  for name, m in (("all", judged), ("full", full))}
            print(json.dumps({"set": which, "events": n_events, "inputs": len(names), "latency_ratio": r,
                              **{k: metrics[f"{r:g}"]["monitor"][k] for k in ("recall", "false_alarm")},
                              "runs_exceeding": metrics[f"{r:g}"]["runs_exceeding"],
                              "slowdown_within_10_points": round(float((error[judged] <= 10).mean()), 4),
                              "full_pool_within_10_points": round(float((error[full] <= 10).mean()), 4),
                              "threshold_all_spills": at["all"], "threshold_full_pool": at["full"],
                              "seconds": round(time.perf_counter() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()
