"""How LightGBM's OpenMP waiting policy fares alone and on a shared host (docs/production.md, "On a host the nightly job shares"),
after `dvc repro`:

    python -m benchmarks.omp_wait [--stage train_um|backtest] [--busy 2] [--policies default PASSIVE spin10k]

Runs the stage's own command (`pond train_um` or `pond backtest` on this checkout's `data/`, outputs in a temporary
folder) once per policy alone, then once per policy beside ``--busy`` CPU-bound processes (`while True: pass`),
and prints the wall time of each run. ``default`` leaves OMP_WAIT_POLICY unset (libgomp spins, then sleeps),
``PASSIVE`` sets it, ``spin10k`` sets GOMP_SPINCOUNT=10000 instead. Each run also prints whether its metrics equal
the first run's: the policy changes how threads wait, never what they compute.
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

ROOT = Path(__file__).resolve().parents[1]
ENV = {"default": {}, "PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}, "spin10k": {"GOMP_SPINCOUNT": "10000"}}


def command(stage: str, out: Path) -> list[str]:
    pond = [sys.executable, "-m", "pond.pipelines", stage]
    if stage == "train_um":
        return [*pond, "--features", "data/features", "--out", str(out / "um"), "--metrics", str(out / "m.json"),
                "--plots", str(out / "plots")]
    return [*pond, "--raw", "data/raw", "--features", "data/features", "--li", "data/models/li", "--out",
            str(out / "bt"), "--plots", str(out / "plots"), "--metrics", str(out / "m.json")]


def run(stage: str, policy: str, busy: int, out: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} | ENV[policy]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
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
    ap.add_argument("--stage", choices=["train_um", "backtest"], default="train_um")
    ap.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the stage in the shared runs")
    ap.add_argument("--policies", nargs="+", choices=list(ENV), default=["default", "PASSIVE"])
    args = ap.parse_args()
    first: bytes | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for busy in (0, args.busy):
            for policy in args.policies:
                out = Path(tmp) / f"{policy}-{busy}"
                wall = run(args.stage, policy, busy, out)
                metrics = (out / "m.json").read_bytes()
                first = first if first is not None else metrics
                print(json.dumps({"stage": args.stage, "policy": policy, "busy_processes": busy,
                                  "wall_s": round(wall, 1), "metrics_equal_first_run": metrics == first}), flush=True)


if __name__ == "__main__":
    main()
