"""Why the optimized policy does not save DRAM in `simulate`, measured, after `dvc repro`:

    python -m benchmarks.analyses.sizing_diagnosis

The same sizing as `pond simulate` (simulator.sizing, pool-aware first fit, 0.1% moves, pools of 8,
16 and 32 sockets) for the combined policy at 1.82 and static 15% / 50% pools, in three settings:
- ``as_is``: the stage's own (warm-up VMs, created before the first modelled night, all local);
- ``late_window``: the same decisions, DRAM measured over the last days of the window only, after
  ``--late-days`` of the policy filling servers;
- ``steady_proxy``: every warm-up VM given the pool fraction of a VM drawn at random from the
  window (same policy), i.e. servers as if the policy had always run. Not a result (it decides VMs
  by other VMs' scores), only a bound on what the warm-up costs.
One line of JSON per (setting, policy, pool size), then a summary line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pond.core.params import load
from pond.evaluation.replay import nightly_decisions, read_trace, row_name, static_decisions
from pond.models.names import static_policy_name
from pond.simulator.pool_sim import place
from pond.simulator.sizing import Question, Trace, fleet_sizing
from pond.simulator.sizing_report import summarize_sizing

ROOT = Path(__file__).resolve().parents[2]

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--late-days", type=int, default=4)
    args = ap.parse_args()
    params = load(ROOT / "params.yaml")
    sp = params.simulate
    vms = read_trace(ROOT / "data/raw")
    (start, end), window, created_in, decisions = nightly_decisions(vms, ROOT / "data/backtest", (1.82,))
    mem = vms.memory_gb.to_numpy(float)
    pools = {row_name(p, r): d["pool_gb"] for (p, r), d in decisions.items() if p == "combined"}
    for f in (0.15, 0.5):
        pools[static_policy_name(f)] = static_decisions(mem, created_in, f)["pool_gb"]
    placement = place(vms, start, end, sp)
    rng = np.random.default_rng(params.base.seed)
    src = np.flatnonzero(created_in)
    pick = rng.choice(src, len(mem))
    steady = {k: np.where(created_in, v / mem, (v / mem)[pick]) * mem for k, v in pools.items()}
    late = (window[0] + args.late_days * 86400, window[1])
    alive = (start < window[1]) & (end > window[0])
    summary = {"servers": None, "vms_alive_per_server_mean": None}
    for setting, decided, w in (("as_is", pools, window), ("late_window", pools, late), ("steady_proxy", steady, window)):
        table = fleet_sizing(Trace(start, end, placement.cluster, placement.host, vms.vcpus.to_numpy(float), mem),
                             decided, Question(placement.sockets_per_host, (8, 16, 32), w,
                                               sp.sockets_per_server * sp.socket_vcpus, sp.max_move_rate,
                                               placement.assignment != "trace"))
        fleet = summarize_sizing(table, sp)
        summary["servers"] = int(fleet.servers.iloc[0])
        for r in fleet.itertuples():
            print(json.dumps({"setting": setting, "policy": r.policy, "pool_sockets": int(r.pool_sockets),
                              "savings": round(float(r.savings), 4),
                              "local_gb_per_server": round(float(r.local_gb_per_server), 1),
                              "gb_per_pool": round(float(r.gb_per_pool), 1), "moves": int(r.moves)}))
    mid = (window[0] + window[1]) // 2
    at_mid = (start <= mid) & (end > mid)
    summary["vms_alive_per_server_mean"] = round(float(at_mid.sum()) / summary["servers"], 2)
    summary["memory_alive_at_mid_window_from_warmup_vms"] = round(float(mem[at_mid & ~created_in].sum()
                                                                        / mem[at_mid].sum()), 3)
    summary["window_vms"] = int(created_in.sum())
    summary["vms_alive_in_window"] = int(alive.sum())
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()
