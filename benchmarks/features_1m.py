"""Time and peak memory of the `features` stage on a >= 1M-VM built-in fleet.

    python benchmarks/features_1m.py [--vms-per-day 12000 --days 90] [--workdir /tmp/pond-bench]

The fleet is generated once into the work dir (not timed); the features stage then runs in a
child process, as `dvc repro` would run it, and its wall time and peak RSS are printed.
Targets (issue 2): under 60 s and under 4 GB on 2 cores.
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


def main() -> None:
    ap = argparse.ArgumentParser()
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
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    pond = [sys.executable, "-m", "pipelines", "--params", str(wd / "params.yaml")]
    if not (wd / "raw" / "vm_counters.parquet").exists():
        t = time.perf_counter()
        subprocess.run(pond + ["generate", "--out", str(wd / "raw")], check=True)
        print(f"generate (not part of the target): {time.perf_counter() - t:.1f} s")
    # The child reports its own peak RSS (RUSAGE_CHILDREN would also count `generate`).
    wrapper = ("import resource, sys; from pipelines.cli import main; rc = main(sys.argv[1:]); "
               "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(rc)")
    pond_measured = [sys.executable, "-c", wrapper, "--params", str(wd / "params.yaml")]
    t = time.perf_counter()
    res = subprocess.run(pond_measured + ["features", "--raw", str(wd / "raw"), "--out", str(wd / "features"),
                                   "--metrics", str(wd / "features.json")],
                         check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    peak_kb = next(int(line.split()[1]) for line in res.stdout.splitlines() if line.startswith("PEAK_RSS_KB"))
    peak_gb = peak_kb / 1024 ** 2
    n = json.loads((wd / "features.json").read_text())["vms"]
    print(json.dumps({"stage": "features", "vms": n, "wall_s": round(wall, 1), "peak_rss_gb": round(peak_gb, 2),
                      "cores": os.cpu_count(), "target_wall_s": 60, "target_peak_rss_gb": 4}))


if __name__ == "__main__":
    main()
