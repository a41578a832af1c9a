"""Fig. 3 in Pond's accounting on the trace's servers, by the window it is measured over, across draws:

    python -m benchmarks.fig3_windows [--seeds 40 ... 49] [--days 35 82]    # about 5 s a draw of 82 days, 2 cores
    python -m benchmarks.fig3_windows --set generate.fleet.vms_per_day=4000    # any key of params.yaml

Why: the replay judges DRAM on two weeks (``simulate.buy_days: auto`` on a 35-day trace), Pond's Fig. 3 reads 75
days of traces. A server's own peak over more days is higher, a pool's less so, and this prints by how much, with no
model and no files: seconds a draw, where ``static_draws`` takes minutes.

Per seed and trace length (``generate.fleet.n_days``; ``base.seed`` set, every other key as committed), the built-in
fleet's VMs are placed once as ``simulate`` places a trace that names no server (``simulate.packing`` on
``sockets_per_server`` sockets of ``socket_vcpus`` and ``socket_memory_gb``): the trace's servers, which its kept
placement (Pond's accounting) holds for every policy. 50% of every VM then goes on pools of 32 sockets, each server
and pool buying its own peak (``simulator.fixed_pools``), over:

- ``judged``: the days the static replay judges (after ``simulate.warmup_days``, the first whole weeks bought,
  ``evaluation.replay.buy_days_for``): on the default trace what ``static_draws`` reports as
  ``half_32_kept_placement``, to a few tenths (that replay places only the VMs alive after the warm-up);
- ``28_days`` after the warm-up, and ``75_days`` (Pond's traces) when the trace holds them;
- ``*_cluster``: one pool spanning each whole cluster over the same days, which no pool size beats.

A trace longer or shorter than the committed one keeps its deployments' size: ``generate.fleet.deployments_per_customer``
counts a customer's deployments over the whole trace, so the draw scales all but the first by the ratio of the
lengths (``--per-trace-deployments`` keeps the committed count, and an 82-day trace's deployments twice as large).

One JSON line per draw (with its VMs, servers and VMs per deployment: per customer, VM type, cluster and
workload), then per trace length the median and range of each figure over the seeds, and the figure pooled over
all their clusters (as Pond pools its 100 clusters).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence

import numpy as np
import yaml

from benchmarks.backtest_variants import ROOT, with_sets
from pond.core.progress import silenced
from pond.evaluation.replay import buy_days_for
from pond.simulator.fixed_pools import fixed_share_savings
from pond.simulator.packing import ServerShape
from pond.simulator.stranding import place

SHARE, SOCKETS, PONDS_WINDOW, MONTH = 0.5, 32, 75, 28
DEPLOYMENT = ["customer_id", "vm_type", "cluster_id", "workload_id"]   # what a deployment's VMs share


def windows(n_days: int, warmup: int, buy: int | str) -> dict[str, tuple[int, int]]:
    """Name -> (first day, days) of each window a trace of ``n_days`` holds."""
    with silenced():
        bought = buy_days_for((warmup * 86400, n_days * 86400), buy)
    got = {"judged": (warmup + bought, n_days - warmup - bought)}
    got |= {f"{d}_days": (warmup, d) for d in (MONTH, PONDS_WINDOW) if warmup + d <= n_days}
    return got


def one_draw(raw: dict, seed: int, n_days: int, hold_deployments: bool = True) -> dict:
    from pond.core.params import Params
    from pond.telemetry.fleet import build_lab, build_vms

    raw = {**raw, "base": {**raw["base"], "seed": seed}}
    fleet = {**raw["generate"]["fleet"], "n_days": n_days}
    if hold_deployments:   # the committed trace's deployments a day, so a deployment keeps its size
        committed = Params(**raw).generate.fleet
        fleet["deployments_per_customer"] = 1 + (committed.deployments_per_customer - 1) * n_days / committed.n_days
    raw["generate"] = {**raw["generate"], "fleet": fleet}
    p = Params(**raw)
    g, sp = p.generate, p.simulate
    vms = build_vms(build_lab(g.lab, g.variant), g.fleet, g.variant)
    k = sp.sockets_per_server
    placed = place(vms, ServerShape(k * sp.socket_vcpus, k * sp.socket_memory_gb), rule=sp.packing)
    out: dict = {"seed": seed, "trace_days": n_days, "vms": len(vms),
                 "servers_median": float(np.median(placed.servers)),
                 "vms_per_deployment": round(len(vms) / vms.groupby(DEPLOYMENT, observed=True).ngroups, 1)}
    for name, (first, days) in windows(n_days, sp.warmup_days, sp.buy_days).items():
        got = fixed_share_savings(vms, (SHARE,), (SOCKETS,), sockets_per_server=k, placed=placed, days=days,
                                  first_day=first)
        out[name] = round(100 * float(got.savings.iloc[0]), 2)
        out[f"{name}_cluster"] = round(100 * float(got.cluster_pool.iloc[0]), 2)
        out[f"{name}_all_local_gb"] = float(got.all_local_gb.iloc[0])
    return out


def summary(rows: Sequence[dict]) -> dict:
    """Per figure the draws' median and range, and ``pooled``: every draw's clusters as one fleet (each draw's
    saving weighted by its servers' peaks, ``fixed_pools.pooled_savings``), as Pond's figure pools its 100."""
    keys = [k for k in rows[0] if k.endswith(("judged", "_days", "_cluster")) and k != "trace_days"]
    weight = {k: [r[f"{k.removesuffix('_cluster')}_all_local_gb"] for r in rows] for k in keys}
    return {"trace_days": rows[0]["trace_days"], "seeds": [r["seed"] for r in rows],
            **{k: {"median": round(statistics.median(r[k] for r in rows), 2), "min": min(r[k] for r in rows),
                   "max": max(r[k] for r in rows),
                   "pooled": round(float(np.average([r[k] for r in rows], weights=weight[k])), 2)} for k in keys}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(40, 50)))
    ap.add_argument("--days", type=int, nargs="+", default=[35, 82], help="generate.fleet.n_days of each trace")
    ap.add_argument("--per-trace-deployments", action="store_true",
                    help="keep generate.fleet.deployments_per_customer at any trace length (larger deployments)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a params.yaml key to change in every draw (repeatable)")
    args = ap.parse_args()
    raw = with_sets(yaml.safe_load((ROOT / "params.yaml").read_text()), args.sets)
    for n_days in args.days:
        rows = []
        for seed in args.seeds:
            with silenced():
                rows.append(one_draw(raw, seed, n_days, not args.per_trace_deployments))
            print(json.dumps(rows[-1]), flush=True)
        print(json.dumps(summary(rows)), flush=True)


if __name__ == "__main__":
    main()
