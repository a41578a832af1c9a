"""The fleet-sized stages with both engines on the same fleet, side by side.

    python -m benchmarks.scale_out [--vms-per-day 12000 --days 90] [--workers 2 --worker-memory 4GiB --partitions 16]
                                   [--stages features train_um simulate] [--engines local dask] | grep '^{'

(the workers' LightGBM log lines share the terminal; the figures are the JSON lines).

The fleet is generated once into ``--workdir`` (partitioned by creation day and cluster), untimed, as
`benchmarks/stage_1m.py` builds its own. Each stage then runs as its own `pond` process, as `dvc repro` runs it:
- ``local``: the single-process path; its peak RSS is the process's;
- ``dask``: the same command with ``--engine dask`` against a cluster this script starts (``--workers``
  processes of ``--worker-memory`` each, one thread each), restarted before every stage so that each
  worker's peak RSS (read from the worker's ``/proc/self/status``, VmHWM) is that stage's. The stage's own process
  (the driver) is reported beside the workers.
Each engine reads its own `features` output. One JSON line per (engine, stage); a stage that fails (for
instance, out of memory) is reported with its exit code, and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The peak is the process's VmHWM, not getrusage's ru_maxrss: Linux carries a parent's peak across fork and
# exec into the child's ru_maxrss, so a stage started by this script, after it held GBs itself (nightly_inputs
# at 10M VMs), reported this script's peak as its own (4.65 GiB for the stage and both workers alike).
WRAPPER = ("import sys; from importlib.metadata import entry_points; "
           "(pond,) = entry_points(group='console_scripts', name='pond'); rc = pond.load()(sys.argv[1:]); "
           "print('PEAK_RSS_KB', next("
           "int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))); sys.exit(rc)")


def stage_argv(stage: str, wd: Path, engine: str) -> list[str]:
    feats, out = wd / f"features_{engine}", wd / engine
    return {
        "features": ["features", "--raw", str(wd / "raw"), "--out", str(feats), "--metrics", str(out / "features.json")],
        "train_um": ["train_um", "--features", str(feats), "--out", str(out / "um"), "--metrics",
                     str(out / "train_um.json"), "--plots", str(out / "plots")],
        "simulate": ["simulate", "--raw", str(wd / "raw"), "--nightly", str(wd / "nightly"), "--out", str(out / "sim"),
                     "--metrics", str(out / "simulate.json"), "--plots", str(out / "plots")],
    }[stage]


def worker_peak_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def run_stage(stage: str, wd: Path, engine: str, client) -> dict:
    argv = ["--params", str(wd / "params.yaml"), "--engine", engine, *stage_argv(stage, wd, engine)]
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{wd / 'mlflow.db'}")
    if client is not None:
        client.restart()
        env["DASK_SCHEDULER_ADDRESS"] = client.scheduler.address
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=False)
    wall = time.perf_counter() - t
    row = {"engine": engine, "stage": stage, "exit_code": res.returncode, "wall_s": round(wall, 1)}
    peak = [int(x.split()[1]) for x in res.stdout.splitlines() if x.startswith("PEAK_RSS_KB")]
    if peak:
        row["driver_peak_rss_gb"] = round(peak[0] / 2 ** 20, 2)
    if res.returncode != 0:
        row["error"] = (res.stderr.strip().splitlines() or ["(no message)"])[-1][:300]
    if client is not None:
        peaks = client.run(worker_peak_kb)
        row["worker_peak_rss_gb"] = sorted(round(kb / 2 ** 20, 2) for kb in peaks.values())
    return row


def same_rows(a: Path, b: Path) -> bool:
    """Two Parquet files hold equal tables (values, types, order), compared a row group at a time."""
    import pyarrow.parquet as pq
    fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    if fa.metadata.num_rows != fb.metadata.num_rows or fa.schema_arrow != fb.schema_arrow:
        return False
    batches = fb.iter_batches(batch_size=131_072)
    for batch in fa.iter_batches(batch_size=131_072):
        if not batch.equals(next(batches)):
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vms-per-day", type=float, default=12000)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--customers", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="4GiB")
    ap.add_argument("--partitions", type=int, default=None, help="engine.partitions (customer partitions of features)")
    ap.add_argument("--stages", nargs="+", default=["features", "train_um", "simulate"])
    ap.add_argument("--engines", nargs="+", default=["local", "dask"])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pond-scale"))
    a = ap.parse_args()
    wd = a.workdir.resolve()
    wd.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)   # the nightly inputs are read from this checkout's data/
    import pandas as pd

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["generate"]["fleet"].update(vms_per_day=a.vms_per_day, n_days=a.days, n_customers=a.customers,
                                       new_customers_per_day=a.customers / 200)
    params["base"]["as_of"] = str((pd.Timestamp(params["generate"]["fleet"]["start"]) + pd.Timedelta(days=a.days - 8)).date())
    params["engine"].update(workers=a.workers, worker_memory=a.worker_memory)
    if a.partitions:
        params["engine"]["partitions"] = a.partitions
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    pond = [sys.executable, "-m", "pond.pipelines", "--params", str(wd / "params.yaml")]
    if not (wd / "raw" / "vms").is_dir():
        t = time.perf_counter()
        subprocess.run(pond + ["generate", "--partitioned", "--out", str(wd / "raw")], check=True, cwd=ROOT)
        print(f"generate --partitioned (untimed for the targets): {time.perf_counter() - t:.1f} s", flush=True)
    cluster = client = None
    if "dask" in a.engines:
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, memory_limit=a.worker_memory,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        for engine in a.engines:
            for stage in a.stages:
                if stage == "simulate" and not (wd / "nightly").exists():
                    from benchmarks.stage_1m import (
                        nightly_inputs,  # this checkout's last backtest night's policies and models
                    )
                    feats = wd / f"features_{engine}"
                    (wd / "features").unlink(missing_ok=True)
                    (wd / "features").symlink_to(feats)   # nightly_inputs reads <workdir>/features
                    nightly_inputs(wd, params["base"]["as_of"], params["backtest"]["nights"],
                                   params["simulate"]["latency_ratios"])
                row = run_stage(stage, wd, engine, client if engine == "dask" else None)
                print(json.dumps({"vms_per_day": a.vms_per_day, "days": a.days, "cores": os.cpu_count(),
                                  "workers": a.workers if engine == "dask" else None,
                                  "worker_memory": a.worker_memory if engine == "dask" else None, **row}), flush=True)
        a_, b_ = wd / "features_local" / "vm_features.parquet", wd / "features_dask" / "vm_features.parquet"
        if a_.exists() and b_.exists():   # the engines' parity, on this fleet, one row group at a time
            print(json.dumps({"vm_features_equal": same_rows(a_, b_)}))
    finally:
        if client is not None:
            client.close()
            cluster.close()


if __name__ == "__main__":
    main()
