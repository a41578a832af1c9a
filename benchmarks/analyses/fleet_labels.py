"""What-if: would slowdown labels from the fleet close the regret? After `benchmarks/backtest_variants.py`:

    python -m benchmarks.analyses.fleet_labels [--workdir /tmp/pond-backtest-variants] [--variants pond walks]

Pond takes LI labels from lab runs *and* from A/B tests of internal workloads that report their performance
(§4.4). The contract's optional `vm_slowdowns` carries the latter, and `optimize` counts them
(`optimize.evidence`); this script asks the question on a finished run made without them, many times over: a
share of customers is "internal", and each of their VMs created in the ``--window`` days up to a night's as-of
reports whether it is sensitive (drawn from the built-in fleet's population truth, noise-free, which no stage
reads). A history key (customer, VM type, region) is one label: its VMs share a score and mostly a workload, so
counting VMs would overstate the evidence; the VM-weighted rows weigh each key by its VMs instead, worth Kish's
effective number of keys, (sum w)^2 / sum w^2. The solver then charges each LI threshold the Jeffreys posterior of
(lab +) fleet counts, and everything else is as `optimize` does. Which customers are internal is drawn ``--draws``
times: the answer depends on it, and a provider does not choose its internal customers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.analyses.regret_anatomy import Replay, replay, summary
from pond.core.days import end_of
from pond.evaluation.combined import slowdown_at
from pond.evaluation.truth import truth_table
from pond.features.history import KEY
from pond.models.inference import load_verified
from pond.optimize.tonight import li_scores


def scored_keys(wd: Path, r: Replay, window: int) -> list[pd.DataFrame]:
    """Per night: each history key of the VMs created in the ``window`` days up to as-of, with its score
    (as-of history, as `optimize` scores recent VMs), its customer and its share of sensitive VMs."""
    o = r.nights[0].params.optimize
    vmf = pd.read_parquet(wd / "features" / "vm_features.parquet", columns=["vm_id", *KEY, "created_at", "has_history"])
    vmf = vmf[vmf.has_history].merge(pd.read_parquet(wd / "raw" / "vms.parquet", columns=["vm_id", "workload_id"]),
                                     on="vm_id")
    table, _ = truth_table(wd / "raw", o.latency_ratio)
    vmf["sensitive"] = slowdown_at(table, vmf.workload_id.to_numpy(object), np.full(len(vmf), 100.0)) > o.pdm
    sess = load_verified(wd / "li" / r.model["file"], r.model["sha256"])
    out = []
    for night in r.nights:
        end = end_of(night.params.base.as_of)
        part = vmf[(vmf.created_at >= end - pd.Timedelta(days=window)) & (vmf.created_at < end)]
        p, known = li_scores(part, night.history, sess, r.model)
        part = part[known].assign(p=p[known])
        out.append(part.groupby(list(KEY), observed=True).agg(p=("p", "first"), sensitive=("sensitive", "mean"),
                                                              vms=("p", "size")).reset_index())
    return out


def what_if(r: Replay, keys: list[pd.DataFrame], share: float, lab_weight: float, seed: int, vm_weighted: bool = False
            ) -> tuple[list[tuple[float, float]], float]:
    """(realized pool and mispredictions per night, mean labelled keys a night) with the fleet's labels."""
    thresholds = r.li.threshold.to_numpy(float)
    customers = np.unique(np.concatenate([k.customer_id.astype(str).to_numpy() for k in keys]))
    internal = customers[np.random.default_rng(seed).random(len(customers)) < share]
    got, labelled = [], []
    for night, k in zip(r.nights, keys):
        k = k[k.customer_id.astype(str).isin(internal)]
        called = k.p.to_numpy()[None, :] >= thresholds[:, None]
        n, e = called.sum(axis=1).astype(float), called @ k.sensitive.to_numpy(float)
        if vm_weighted:   # the VM-weighted rate, worth Kish's effective number of keys
            w = k.vms.to_numpy(float)
            sw, sw2 = called @ w, called @ (w * w)
            n = np.where(sw2 > 0, sw * sw / np.maximum(sw2, 1e-12), 0.0)
            e = np.where(sw > 0, (called @ (w * k.sensitive.to_numpy(float))) / np.maximum(sw, 1e-12), 0.0) * n
        li = r.li.assign(called=n + lab_weight * r.li.called.to_numpy(float),
                         errors=e + lab_weight * r.li.errors.to_numpy(float))
        got.append(r.resolve(night, li=li)), labelled.append(len(k))
    return got, float(np.mean(labelled))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pond-backtest-variants"))
    ap.add_argument("--variants", nargs="+", default=["pond", "walks"])
    ap.add_argument("--shares", nargs="+", type=float, default=[0.1, 0.2])
    ap.add_argument("--window", type=int, default=28, help="days of labelled creations up to each as-of")
    ap.add_argument("--draws", type=int, default=5, help="draws of which customers are internal")
    a = ap.parse_args()
    for v in a.variants:
        r = replay(a.workdir / v)
        keys = scored_keys(a.workdir / v, r, a.window)
        print(f"{v}: the lab only (optimize as it is): {summary(r, [r.resolve(n) for n in r.nights])}")
        for share in a.shares:
            for lab_weight, vw, name in ((1.0, False, "lab + fleet"), (0.0, False, "fleet only"),
                                         (1.0, True, "lab + fleet VM-weighted"), (0.0, True, "fleet VM-weighted")):
                for draw in range(a.draws):
                    got, n = what_if(r, keys, share, lab_weight, seed=draw, vm_weighted=vw)
                    print(f"  {share:.0%} of customers internal, draw {draw}, {name} ({n:.0f} keys a night): "
                          f"{summary(r, got)}")


if __name__ == "__main__":
    main()
