"""How LightGBM's OpenMP waiting policy fares alone and on a shared host (docs/production.md, "On a host the nightly job shares"),
after `dvc repro`:

    python -m benchmarks.omp_wait [--stage train_um|backtest|fit] [--busy 2] [--beside loop|fit]
                                  [--policies pond libgomp PASSIVE spin10k]

Runs the stage's own command (`pond train_um` or `pond backtest` on this checkout's `data/`, outputs in a temporary
folder; ``fit``: three LightGBM quantile fits of 80,000 random rows, no data needed) once per policy alone, then once
per policy beside ``--busy`` CPU-bound processes (``--beside loop``: `while True: pass`; ``fit``: the fits over and
over, as a second job on the host would), and prints the wall time of each run. ``pond`` sets nothing (the
command sets GOMP_SPINCOUNT=1000: idle threads spin briefly, then sleep), ``libgomp`` sets GOMP_SPINCOUNT=300000
(libgomp's own default, what the commands ran with before), ``PASSIVE`` sets OMP_WAIT_POLICY=PASSIVE (no spinning),
``spin10k`` GOMP_SPINCOUNT=10000. Each run also prints whether its metrics equal the first run's: the policy changes
how threads wait, never what they compute.
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

from pond.core.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]
ENV = {"pond": {}, "libgomp": {"GOMP_SPINCOUNT": "300000"}, "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
       "spin10k": {"GOMP_SPINCOUNT": "10000"}}


FIT = """
import json, sys, numpy as np, lightgbm as lgb
rng = np.random.default_rng(0)
X, y = rng.normal(size=(80_000, 20)), rng.random(80_000)
preds = [lgb.LGBMRegressor(objective="quantile", alpha=0.04, n_jobs=2, verbose=-1).fit(X, y).predict(X[:100]).tolist()
         for _ in range(3)]
json.dump(preds, open(sys.argv[1], "w"))
"""


def command(stage: str, out: Path) -> list[str]:
    if stage == "fit":                   # three LightGBM quantile fits of 80,000 rows, no pond in between
        out.mkdir(parents=True, exist_ok=True)
        return [sys.executable, "-c", FIT, str(out / "m.json")]
    pond = [sys.executable, "-m", "pond.pipelines", stage]
    if stage == "train_um":
        return [*pond, "--features", "data/features", "--out", str(out / "um"), "--metrics", str(out / "m.json"),
                "--plots", str(out / "plots")]
    return [*pond, "--raw", "data/raw", "--features", "data/features", "--li", "data/models/li", "--out",
            str(out / "bt"), "--plots", str(out / "plots"), "--metrics", str(out / "m.json")]


def run(stage: str, policy: str, busy: int, out: Path, beside: str) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} | ENV[policy]
    env |= Runtime.openmp(env)           # what a `pond` command sets, for the fits that are not one
    hog = [sys.executable, "-c", "while True: pass"] if beside == "loop" else \
        [sys.executable, "-c", f"while True:\n    exec({FIT!r})", os.devnull]
    hogs = [subprocess.Popen(hog, env=env) for _ in range(busy)]
    try:
        start = time.perf_counter()
        subprocess.run(command(stage, out), cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", choices=["train_um", "backtest", "fit"], default="train_um")
    ap.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the stage in the shared runs")
    ap.add_argument("--beside", choices=["loop", "fit"], default="loop",
                    help="what they run: a Python loop, or the `fit` stage's fits over and over (under the policy)")
    ap.add_argument("--policies", nargs="+", choices=list(ENV), default=["pond", "libgomp"])
    args = ap.parse_args()
    first: bytes | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for busy in (0, args.busy):
            for policy in args.policies:
                out = Path(tmp) / f"{policy}-{busy}"
                wall = run(args.stage, policy, busy, out, args.beside)
                metrics = (out / "m.json").read_bytes()
                first = first if first is not None else metrics
                print(json.dumps({"stage": args.stage, "policy": policy, "busy_processes": busy, "beside": args.beside,
                                  "wall_s": round(wall, 1), "metrics_equal_first_run": metrics == first}), flush=True)


if __name__ == "__main__":
    main()
