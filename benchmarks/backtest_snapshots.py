"""`backtest`'s nightly snapshots with both engines on one fleet, side by side.

    python -m benchmarks.backtest_snapshots --raw /tmp/pond-scale-10m/raw --params /tmp/pond-scale-10m/params.yaml
                                            [--nights 7] [--engines local dask] | grep '^{'

Each night of `pond backtest` starts from the snapshot `features` would have written that night (customer
percentiles and workload history as of the night). The local engine reads the whole `vms` table into the stage's
process for them; the dask engine's workers compute every night's from one split of the fleet by customer
(``evaluation.backtest.snapshots``). This runs only that step, as its own process per engine (what the rest of a
night holds is `train_um`'s and `evaluate`'s, measured by `benchmarks/scale_out.py`): wall time, the process's peak
RSS (VmHWM) while it reads each night's snapshot and writes it, as `backtest` does, and with dask each worker's (a LocalCluster of ``--workers`` processes of ``--worker-memory``, restarted
first). The last line says whether both engines' snapshots are equal, night by night.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scale_out import worker_peak_kb  # each worker's VmHWM, as scale_out reads it

ROOT = Path(__file__).resolve().parents[1]

STEP = """
import sys
from pathlib import Path
import pandas as pd
from pond.core.cluster import session
from pond.core.params import load
from pond.evaluation.backtest import snapshots
from pond.telemetry.storage import location
params_file, engine, raw, nights, out, tmp = sys.argv[1:]
params = load(params_file)
params = params.model_copy(update={"engine": params.engine.model_copy(update={"backend": engine})})
last = pd.Timestamp(params.base.as_of)
nights = [params.with_as_of((last - pd.Timedelta(days=k)).date().isoformat()) for k in range(int(nights) - 1, -1, -1)]
with session(params.engine) as client, snapshots(nights, location(raw), Path(tmp), client) as snaps:
    for i, night in enumerate(snaps):     # as backtest: one night's snapshot at a time
        cust, hist = night()
        cust.to_parquet(Path(out) / f"customers-{i}.parquet")
        hist.to_parquet(Path(out) / f"history-{i}.parquet")
        del cust, hist
print("PEAK_RSS_KB", next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", required=True)
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--nights", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="4GiB")
    ap.add_argument("--engines", nargs="+", default=["local", "dask"])
    a = ap.parse_args()
    cluster = client = None
    if "dask" in a.engines:
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, memory_limit=a.worker_memory,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    outs = {}
    with tempfile.TemporaryDirectory(prefix="pond-snapshots-") as tmp:
        try:
            for engine in a.engines:
                env = dict(os.environ)
                env.pop("DASK_SCHEDULER_ADDRESS", None)
                if engine == "dask":
                    client.restart()
                    env["DASK_SCHEDULER_ADDRESS"] = client.scheduler.address
                outs[engine] = Path(tmp) / engine
                outs[engine].mkdir()
                t = time.perf_counter()
                res = subprocess.run([sys.executable, "-c", STEP, str(a.params), engine, a.raw, str(a.nights),
                                      str(outs[engine]), tmp], capture_output=True, text=True, env=env, cwd=ROOT,
                                     check=False)
                row = {"engine": engine, "nights": a.nights, "exit_code": res.returncode,
                       "wall_s": round(time.perf_counter() - t, 1), "cores": os.cpu_count()}
                peak = [int(x.split()[1]) for x in res.stdout.splitlines() if x.startswith("PEAK_RSS_KB")]
                if peak:
                    row["process_peak_rss_gb"] = round(peak[0] / 2 ** 20, 2)
                if res.returncode != 0:
                    lines = res.stderr.strip().splitlines() or ["(no message)"]
                    row["error"] = next((x for x in reversed(lines) if "Error" in x or "Exception" in x), lines[-1])[:300]
                if engine == "dask":
                    row["workers"], row["worker_memory"] = a.workers, a.worker_memory
                    row["worker_peak_rss_gb"] = sorted(round(kb / 2 ** 20, 2) for kb in
                                                       client.run(worker_peak_kb).values())
                print(json.dumps(row), flush=True)
        finally:
            if client is not None:
                client.close()
                cluster.close()
        done = [d for d in outs.values() if len(list(d.glob("*.parquet"))) == 2 * a.nights]
        if len(done) == 2:
            import pandas as pd
            same = all(pd.read_parquet(done[0] / f.name).equals(pd.read_parquet(f)) for f in done[1].glob("*.parquet"))
            print(json.dumps({"snapshots_equal": same, "customers": len(pd.read_parquet(done[0] / "customers-0.parquet")),
                              "history_rows_per_night": [pd.read_parquet(done[0] / f"history-{i}.parquet").shape[0]
                                                         for i in range(a.nights)]}), flush=True)

if __name__ == "__main__":
    main()
