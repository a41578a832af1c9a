"""`simulate`'s pool-aware sizing of one cluster and one policy, three ways: its pool sizes sharing
their exact replays (``simulator.pool_fit.Replays``, what `simulate` does), each pool size reusing
only its own, and no reuse at all (what it did before). All three must give the same table; the
script checks it and prints the replays run and the wall time of each.

    python -m benchmarks.shared_replays [--workdir /tmp/pond-scale-10m] [--policy um_only] [--ratio 1.82]

``--workdir`` is a fleet `benchmarks/scale_out.py` built (raw tables, nightly scores and policies,
params.yaml); the cluster is its largest by VMs alive in the measured window.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from pond.core.params import Params
from pond.evaluation.replay import measured_window, nightly_decisions, read_trace
from pond.models.names import at_ratio
from pond.simulator import pool_fit
from pond.simulator.pool_sim import place
from pond.simulator.sizing import Question, Trace, distinct_sizing, in_window


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pond-scale-10m"))
    ap.add_argument("--policy", default="um_only")
    ap.add_argument("--ratio", type=float, default=1.82)
    args = ap.parse_args()
    params = Params(**yaml.safe_load((args.workdir / "params.yaml").read_text()))
    sp = params.simulate
    vms = read_trace(args.workdir / "raw")
    (start, end), window, _, decisions = nightly_decisions(vms, args.workdir / "nightly", sp.latency_ratios,
                                                           sp.pool_caps)
    measured, _ = measured_window(window, "", sp, True, vms["created_at"].min())   # after the policies' warm-up
    placement = place(vms, start, end, sp)                # the whole trace, then the window's VMs, as simulate
    keep = in_window(start, end, window)
    vms, start, end = vms[keep].reset_index(drop=True), start[keep], end[keep]
    cluster, host = placement.cluster[keep], placement.host[keep]
    codes, counts = np.unique(cluster, return_counts=True)
    i = np.flatnonzero(cluster == codes[np.argmax(counts)])
    name = at_ratio(args.policy, args.ratio)
    pool = {name: decisions[(args.policy, args.ratio)]["pool_gb"][keep][i]}
    trace = Trace(start[i], end[i], cluster[i], host[i], vms["vcpus"].to_numpy(float)[i],
                  vms["memory_gb"].to_numpy(float)[i])

    def asked(sizes: tuple[int, ...]) -> Question:
        return Question(placement.sockets_per_host, sizes, measured, sp.sockets_per_server * sp.socket_vcpus,
                        sp.max_move_rate, True)

    distinct_sizing(trace, pool, asked(sp.pool_sockets[:1]), False)        # compile the kernels first

    runs = [0]
    replay = pool_fit.replay

    def counted(*a, **k):
        runs[0] += 1
        return replay(*a, **k)

    pool_fit.replay = counted
    room = pool_fit.Replays._room
    out = {}
    for label, sizes, reuse in (("shared by the pool sizes", [sp.pool_sockets], True),
                                ("each pool size on its own", [(k,) for k in sp.pool_sockets], True),
                                ("no reuse (before)", [sp.pool_sockets], False)):
        pool_fit.Replays._room = room if reuse else (lambda self, level, cap_pool: False)
        runs[0] = 0
        t = time.perf_counter()
        table = pd.concat([distinct_sizing(trace, pool, asked(s), False) for s in sizes], ignore_index=True)
        out[label] = {"replays": runs[0], "wall_s": round(time.perf_counter() - t, 2), "table": table}
    first = next(iter(out.values()))["table"]
    print(json.dumps({"cluster_vms": len(i), "policy": name, "pool_sockets": list(sp.pool_sockets),
                      **{k: {"replays": v["replays"], "wall_s": v["wall_s"]} for k, v in out.items()},
                      "tables_equal": all(v["table"].equals(first) for v in out.values())}))


if __name__ == "__main__":
    main()
