"""Time and peak memory of one pipeline stage on a >= 1M-VM built-in fleet.

    python benchmarks/stage_1m.py features      # target: < 60 s, < 4 GB on 2 cores (issue 2)
    python benchmarks/stage_1m.py train_um      # target: < 3 min on 2 cores (issue 4)
    python benchmarks/stage_1m.py simulate      # target: < 60 s on 2 cores (issue 5)

Options: --vms-per-day 12000 --days 90 --workdir /tmp/pond-bench. The fleet (and, for
train_um, its features) is built once into the work dir, untimed; simulate replays the whole
trace (first-fit placement, then one sweep per grouping) under six static pool fractions, as
many policies as the pipeline's stage replays; the measured stage then runs
in a child process, as `dvc repro` runs it, which reports its own wall time and peak RSS.
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


STAGES = {
    "features": None,
    "train_um": lambda wd: ["train_um", "--features", str(wd / "features"), "--out", str(wd / "um"),
                            "--metrics", str(wd / "train_um.json"), "--plots", str(wd / "plots")],
    "simulate": lambda wd: ["simulate", "--static-only", "--raw", str(wd / "raw"), "--metrics", str(wd / "simulate.json"),
                            "--plots", str(wd / "plots")],
}
TARGETS = {"features": {"target_wall_s": 60, "target_peak_rss_gb": 4}, "train_um": {"target_wall_s": 180},
           "simulate": {"target_wall_s": 60}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=sorted(STAGES))
    ap.add_argument("--vms-per-day", type=float, default=12000)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--customers", type=int, default=20000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pond-bench"))
    args = ap.parse_args()
    wd = args.workdir
    wd.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load(Path("params.yaml").read_text())
    params["generate"]["fleet"].update(vms_per_day=args.vms_per_day, n_days=args.days,
                                       n_customers=args.customers, new_customers_per_day=args.customers / 200)
    start = params["generate"]["fleet"].get("start", "2026-01-01")
    import pandas as pd
    params["base"]["as_of"] = str((pd.Timestamp(start) + pd.Timedelta(days=args.days - 8)).date())
    params.setdefault("simulate", {})["static_fractions"] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    pond = [sys.executable, "-m", "pipelines", "--params", str(wd / "params.yaml")]
    if not (wd / "raw" / "vm_counters.parquet").exists():
        t = time.perf_counter()
        subprocess.run(pond + ["generate", "--out", str(wd / "raw")], check=True)
        print(f"generate (not part of the target): {time.perf_counter() - t:.1f} s")
    features = ["features", "--raw", str(wd / "raw"), "--out", str(wd / "features"), "--metrics", str(wd / "features.json")]
    if args.stage == "train_um" and not (wd / "features" / "vm_features.parquet").exists():
        subprocess.run(pond + features, check=True)
    argv = features if args.stage == "features" else STAGES[args.stage](wd)
    # The child reports its own peak RSS (RUSAGE_CHILDREN would also count `generate`).
    wrapper = ("import resource, sys; from pipelines.cli import main; rc = main(sys.argv[1:]); "
               "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{wd / 'mlflow.db'}")
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", wrapper, "--params", str(wd / "params.yaml"), *argv],
                         check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    peak_kb = next(int(line.split()[1]) for line in res.stdout.splitlines() if line.startswith("PEAK_RSS_KB"))
    n = json.loads((wd / f"{'simulate' if args.stage == 'simulate' else 'features'}.json").read_text())["vms"]
    print(json.dumps({"stage": args.stage, "vms": n, "wall_s": round(wall, 1),
                      "peak_rss_gb": round(peak_kb / 1024 ** 2, 2), "cores": os.cpu_count(), **TARGETS[args.stage]}))


if __name__ == "__main__":
    main()
