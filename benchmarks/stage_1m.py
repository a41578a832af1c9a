"""Time and peak memory of one pipeline stage on a >= 1M-VM built-in fleet.

    python benchmarks/stage_1m.py features      # target: < 60 s, < 4 GB on 2 cores
    python benchmarks/stage_1m.py train_um      # target: < 3 min on 2 cores
    python benchmarks/stage_1m.py simulate      # target: < 2 min on 2 cores

Options: --vms-per-day 12000 --days 90 --workdir /tmp/pond-bench. The fleet (and, for
train_um and simulate, its features) is built once into the work dir, untimed; the measured
stage then runs in a child process, as `dvc repro` runs it, which reports its own wall time and
peak RSS.

simulate is the steady-state replay with every policy and pool size of params.yaml: first-fit
placement of the whole trace, then per cluster the exact replay and sizing search over the last
``backtest.nights`` days, after a warm-up of everything before. Its nightly inputs are built
untimed, as `pond backtest` leaves them: a folder per night with the policies and the scores of
the next day's VMs. Training a model per night on this fleet is `backtest`'s cost, not the
replay's; here every night reuses the models of the pipeline's last backtest night
(``data/backtest`` of this checkout: run `dvc repro` first), which changes the decisions'
values, not the replay's work.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    import pandas as pd

STAGES = {
    "features": None,
    "train_um": lambda wd: ["train_um", "--features", str(wd / "features"), "--out", str(wd / "um"),
                            "--metrics", str(wd / "train_um.json"), "--plots", str(wd / "plots")],
    "simulate": lambda wd: ["simulate", "--raw", str(wd / "raw"), "--nightly", str(wd / "nightly"),
                            "--out", str(wd / "sim"), "--metrics", str(wd / "simulate.json"), "--plots", str(wd / "plots")],
}
TARGETS = {"features": {"target_wall_s": 60, "target_peak_rss_gb": 4}, "train_um": {"target_wall_s": 180},
           "simulate": {"target_wall_s": 120}}


def nightly_inputs(wd: Path, as_of: str, nights: int, ratios: list[float]) -> None:
    """A `pond backtest`-shaped folder per night: the policies and models of this checkout's last
    backtest night, and the next day's VMs of the benchmark fleet scored by them (the first night's also the VMs
    its next day opens with, ``scores_before.parquet``, as `pond backtest` writes them)."""
    import shutil

    import pandas as pd

    from pond.models.names import at_ratio
    from pond.telemetry.io import read_alive

    src = sorted(d for d in Path("data/backtest").glob("*") if (d / "scores.parquet").exists())
    if not src:
        sys.exit("benchmarks/stage_1m.py simulate: no data/backtest night in this checkout; run `dvc repro` first")
    last = src[-1]
    vmf = pd.read_parquet(wd / "features" / "vm_features.parquet")
    history = pd.read_parquet(wd / "features" / "snapshot" / "workload_history.parquet")
    out = wd / "nightly"
    shutil.rmtree(out, ignore_errors=True)
    scored = _scorer(last, history, ratios)
    for k in range(nights - 1, -1, -1):
        night = (pd.Timestamp(as_of) - pd.Timedelta(days=k)).date()
        d = out / night.isoformat()
        d.mkdir(parents=True)
        served = night + pd.Timedelta(days=1)
        for r in ratios:
            shutil.copy(last / f"{at_ratio('policy', r)}.json", d / f"{at_ratio('policy', r)}.json")
        scored(d, vmf[vmf.day == served].reset_index(drop=True), "scores.parquet")
        if k == nights - 1:   # as `pond backtest`: the first night also decides the VMs its next day opens with
            scored(d, read_alive(wd / "features" / "vm_features.parquet", served), "scores_before.parquet")


def _scorer(last: Path, history: pd.DataFrame, ratios: list[float]):
    """Writes a night's scores of ``vms`` by the policies copied into it and the last night's models."""
    import pandas as pd

    from pond.models.inference import Models, score
    from pond.models.names import at_ratio
    from pond.models.policy import read_policy

    def scored(d: Path, vms: pd.DataFrame, name: str) -> None:
        cols = {"vm_id": vms.vm_id.to_numpy()}
        for r in ratios:
            s = score(Models.from_policy(read_policy(d / f"{at_ratio('policy', r)}.json"), Path("data/models/li"),
                                         last / "um"), vms, history)
            cols.update({"has_history": s.has_history, "um_raw": s.um_raw, at_ratio("p_insensitive", r): s.p_insensitive})
        pd.DataFrame(cols).to_parquet(d / name, index=False)

    return scored


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
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    pond = [sys.executable, "-m", "pond.pipelines", "--params", str(wd / "params.yaml")]
    if not (wd / "raw" / "vm_counters.parquet").exists():
        t = time.perf_counter()
        subprocess.run(pond + ["generate", "--out", str(wd / "raw")], check=True)
        print(f"generate (not part of the target): {time.perf_counter() - t:.1f} s")
    features = ["features", "--raw", str(wd / "raw"), "--out", str(wd / "features"), "--metrics", str(wd / "features.json")]
    if args.stage in ("train_um", "simulate") and not (wd / "features" / "vm_features.parquet").exists():
        subprocess.run(pond + features, check=True)
    if args.stage == "simulate":
        nightly_inputs(wd, params["base"]["as_of"], params["backtest"]["nights"], params["simulate"]["latency_ratios"])
    argv = features if args.stage == "features" else STAGES[args.stage](wd)
    # The child reports its own peak RSS, VmHWM (RUSAGE_CHILDREN would also count `generate`; and the child's
    # ru_maxrss starts at this process's peak, which Linux carries across fork and exec: nightly_inputs above).
    wrapper = ("import sys; from importlib.metadata import entry_points; "
               "(pond,) = entry_points(group='console_scripts', name='pond'); rc = pond.load()(sys.argv[1:]); "
               "print('PEAK_RSS_KB', next("
               "int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))); sys.exit(rc)")
    env = dict(os.environ, MLFLOW_TRACKING_URI=f"sqlite:///{wd / 'mlflow.db'}")
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", wrapper, "--params", str(wd / "params.yaml"), *argv],
                         check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    peak_kb = next(int(line.split()[1]) for line in res.stdout.splitlines() if line.startswith("PEAK_RSS_KB"))
    n = json.loads((wd / "features.json").read_text())["vms"] if (wd / "features.json").exists() else None
    extra = {}
    if args.stage == "simulate":
        m = json.loads((wd / "simulate.json").read_text())
        extra = {"window_vms": m["window_vms"], "warmup_vms_alive": m["warmup_vms_alive_at_window_start"],
                 "policies": len(m["policies"]), "pool_sizes": len(params["simulate"]["pool_sockets"]),
                 "clusters": m["clusters"]}
        print(res.stdout)
    print(json.dumps({"stage": args.stage, "vms": n, **extra, "wall_s": round(wall, 1),
                      "peak_rss_gb": round(peak_kb / 1024 ** 2, 2), "cores": os.cpu_count(), **TARGETS[args.stage]}))


if __name__ == "__main__":
    main()
