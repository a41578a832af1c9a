"""What-if: where the fleet's LI errors come from, and a history rule that removes most of them.
After `benchmarks/backtest_variants.py`:

    python -m benchmarks.analyses.history_spread [--workdir /tmp/pond-backtest-variants] [--variants pond walks]

A VM is scored from its history key (customer, VM type, region): the counters of the key's earlier VMs, summed.
A customer may run more than one workload under one key, and then the history describes a mix. This script:
- splits the fleet's LI errors by whether the key runs more than one workload in the whole trace (the fleet's
  truth link, evaluation only);
- scores every earlier VM of the key on its own counters with the same forest, and tries a rule a provider can
  compute: call a key insensitive only if its *least* insensitive VM of the history window
  (``features.history_days`` up to the night, counters available ``features.counter_delay_s`` after creation) is
  at or above the threshold, i.e. the VM's score becomes min(the key's score, that minimum);
- scores one run of each workload outside the lab (its first VM's own counters) and compares the error rate
  among those called with the lab's out-of-fold estimate: is the gap in the forest or in the history?
- re-runs the solver on every night with the rule (the recent VMs' LI shares and the next day's decisions both
  under it) at several ``optimize.confidence`` levels, beside the served rule.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.analyses.regret_anatomy import Replay, replay, summary, variants_cli, with_confidence
from pond.core.days import end_of
from pond.evaluation.combined import slowdown_at
from pond.evaluation.regret import realized_grid
from pond.evaluation.truth import truth_table
from pond.features.history import KEY
from pond.features.tma import pmu_features
from pond.models.inference import load_verified
from pond.models.runtime import onnx_p_insensitive
from pond.optimize.solver import best, called_shares
from pond.optimize.tonight import choose, li_scores
from pond.telemetry.io import read_tables

LEVELS = (None, 0.7, 0.8, 0.9, 0.95)


def vm_scores(wd: Path, r: Replay) -> pd.DataFrame:
    """Every VM with its key, creation time, the day its counters reach the history, and its own score."""
    f = r.nights[0].params.features
    vms = pd.read_parquet(wd / "raw" / "vms.parquet", columns=["vm_id", *KEY, "created_at", "workload_id"])
    counters = pd.read_parquet(wd / "raw" / "vm_counters.parquet")
    events = [c for c in counters.columns if c != "vm_id"]
    X = pmu_features(counters[events], events).reindex(columns=r.model["features"]).to_numpy(np.float32)
    sess = load_verified(wd / "li" / r.model["file"], r.model["sha256"])
    own = pd.Series(onnx_p_insensitive(sess, X, r.model["classes"]), index=counters.vm_id.to_numpy())
    vms["own_p"] = vms.vm_id.map(own)
    vms["available"] = (vms.created_at + pd.Timedelta(seconds=f.counter_delay_s)).dt.floor("D")
    n = vms.groupby(list(KEY), observed=True).workload_id.transform("nunique")
    vms["mixed"] = (n > 1).to_numpy()
    return vms


def key_minimum(vms: pd.DataFrame, day: pd.Timestamp, history_days: int) -> pd.DataFrame:
    """Per key, the lowest own score among the VMs whose counters the history of ``day`` holds."""
    h = vms[(vms.available < day) & (vms.available >= day - pd.Timedelta(days=history_days)) & vms.own_p.notna()]
    return h.groupby(list(KEY), observed=True).own_p.min().rename("key_min").reset_index()


def with_rule(rows: pd.DataFrame, p: np.ndarray, kmin: pd.DataFrame) -> np.ndarray:
    """The rule's score of each row: min(its key's score, the key's least insensitive VM)."""
    m = rows[list(KEY)].merge(kmin, on=list(KEY), how="left").key_min.to_numpy(float)
    return np.fmin(p, np.where(np.isnan(m), p, m))


def analyse(wd: Path) -> None:
    r = replay(wd)
    params = r.nights[0].params
    o, f = params.optimize, params.features
    thresholds = r.li.threshold.to_numpy(float)
    vms = vm_scores(wd, r)
    sess = load_verified(wd / "li" / r.model["file"], r.model["sha256"])
    vmf = pd.read_parquet(wd / "features" / "vm_features.parquet",
                          columns=["vm_id", *KEY, "created_at", "memory_gb", "has_history"])
    rows, served, ruled = [], {lv: [] for lv in LEVELS}, {lv: [] for lv in LEVELS}
    hindsight = []
    for night in r.nights:
        day = end_of(night.params.base.as_of)
        kmin = key_minimum(vms, day, f.history_days)
        d = night.decisions.merge(vms[["vm_id", *KEY, "mixed"]], on="vm_id", how="left")
        d["p_rule"] = with_rule(d, d.p_insensitive.to_numpy(float), kmin)
        rows.append(d)
        # the solver's inputs under the rule: the recent VMs scored as `optimize` scores them, then the rule
        recent = vmf[(vmf.created_at >= day - pd.Timedelta(days=o.recent_days)) & (vmf.created_at < day)]
        p, known = li_scores(recent, night.history, sess, r.model)
        p = with_rule(recent, p, kmin)
        li_vm, li_gb = called_shares(p, known, recent.memory_gb.to_numpy(float), thresholds)
        pool, m = realized_grid(d.assign(p_insensitive=d.p_rule), thresholds, night.offsets, r.q)
        b = best(pool, m, r.budget)
        hindsight.append(float(pool[b]) if b is not None else 0.0)
        for lv in LEVELS:
            p_lv = with_confidence(night.params, lv)
            served[lv].append(r.resolve(night, params=p_lv))
            c = choose(p_lv, r.li, li_vm, li_gb, night.um_nights)[1]
            ruled[lv].append((float(pool[c]), float(m[c])))
    d = pd.concat(rows, ignore_index=True)
    h, s, mixed = d.has_history.to_numpy(bool), d.sensitive.to_numpy(float), d.mixed.to_numpy(bool)
    print(f"{wd.name}: {len(r.nights)} nights, {len(d)} VMs of their next days")
    for t in (0.5, 0.77):
        called = h & (d.p_insensitive.to_numpy() >= t)
        kept = h & (d.p_rule.to_numpy() >= t)
        print(f"  at {t:g}: served, {called.mean():.1%} of VMs called, error rate {np.nanmean(s[called]):.2%}; "
              f"{mixed[called].mean():.1%} of them in keys running more than one workload, erring at "
              f"{np.nanmean(s[called & mixed]):.1%} (the rest {np.nanmean(s[called & ~mixed]):.2%}): "
              f"{np.nansum(s[called & mixed]) / np.nansum(s[called]):.0%} of the errors. With the rule: "
              f"{kept.sum() / called.sum():.1%} of those calls kept, error rate {np.nanmean(s[kept]):.2%}")
    # the same forest on one run of each workload outside the lab (its first VM's own counters), as the lab's
    # out-of-fold estimate scores a lab workload: does it generalize as the lab says, before any history?
    lab = set(read_tables(wd / "raw", ["workloads"])["workloads"].workload_id)
    first = vms[vms.own_p.notna() & ~vms.workload_id.isin(lab)].drop_duplicates("workload_id")
    table, _ = truth_table(wd / "raw", o.latency_ratio)
    sensitive = slowdown_at(table, first.workload_id.to_numpy(object), np.full(len(first), 100.0)) > o.pdm
    for t in (0.5, 0.77):
        k = int(np.argmin(abs(thresholds - t)))
        called = first.own_p.to_numpy() >= t
        print(f"  at {t:g}, one run of each of the {len(first)} workloads outside the lab: {called.sum()} called, "
              f"{sensitive[called].mean():.2%} of them sensitive; the lab's estimate {r.q[k]:.2%} "
              f"({int(r.li.called[k])} called, {int(r.li.errors[k])} sensitive)")
    ruled_replay = dc_replace(r, nights=[dc_replace(n, hindsight=hh) for n, hh in zip(r.nights, hindsight)])
    for lv in LEVELS:
        print(f"  optimize.confidence {lv}: served {summary(r, served[lv])} | with the rule "
              f"{summary(ruled_replay, ruled[lv])}")


if __name__ == "__main__":
    variants_cli(__doc__, analyse)
