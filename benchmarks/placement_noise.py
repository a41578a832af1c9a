"""How far the replay's savings move when a small share of the VMs is left out: the first fit's own noise, which the
interval over clusters does not hold. Each draw leaves out a seeded share of the `vms` table (every policy and all
local lose the same VMs), runs `pond simulate` on the same backtest nights, and sets each policy's saving at each
pool size against the run on every VM.

    python -m benchmarks.placement_noise [--raw data/raw] [--nightly data/backtest] [--draws 3] [--share 0.01]

Run after `dvc repro` (about 90 s a `simulate` on 2 cores; the run on every VM is made here too). Prints one JSON
line per draw and a Markdown table: per policy, the largest change of its saving over pool sizes, as a provider buys
and in Pond's accounting. A difference between two policies smaller than that is not evidence either way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = {"savings_pct": "as a provider buys", "kept_placement_pct": "on the trace's servers"}


def simulate(raw: Path, nightly: Path, out: Path) -> pd.DataFrame:
    subprocess.run([sys.executable, "-m", "pond.pipelines.cli", "--quiet", "simulate", "--raw", str(raw), "--nightly",
                    str(nightly), "--out", str(out / "sim"), "--metrics", str(out / "simulate.json"), "--plots",
                    str(out / "plots")], check=True)
    return pd.read_csv(out / "plots" / "savings.csv").set_index(["policy", "pool_sockets"])


def thinned(raw: Path, to: Path, share: float, seed: int) -> Path:
    """A copy of ``raw`` (its other tables linked) whose `vms` table leaves out ``share`` of the VMs."""
    to.mkdir(parents=True)
    for f in raw.iterdir():
        if f.name != "vms.parquet":
            (to / f.name).symlink_to(f.resolve())
    vms = pd.read_parquet(raw / "vms.parquet")
    keep = np.random.default_rng(seed).random(len(vms)) >= share
    vms[keep].to_parquet(to / "vms.parquet", index=False)
    return to


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path, default=Path("data/raw"))
    ap.add_argument("--nightly", type=Path, default=Path("data/backtest"))
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--share", type=float, default=0.01, help="of the VMs left out in each draw")
    args = ap.parse_args()
    if not (args.raw / "vms.parquet").is_file():
        sys.exit(f"placement_noise: {args.raw / 'vms.parquet'} not found: run `dvc repro` first, or pass --raw "
                 "a folder whose `vms` table is one Parquet file")
    with tempfile.TemporaryDirectory(prefix="pond-noise-") as tmp:
        base = simulate(args.raw, args.nightly, Path(tmp) / "every")
        moved = {}
        for seed in range(args.draws):
            got = simulate(thinned(args.raw, Path(tmp) / f"raw{seed}", args.share, seed), args.nightly,
                           Path(tmp) / f"draw{seed}")
            diff = (got[list(COLUMNS)] - base[list(COLUMNS)]).dropna()
            moved[seed] = diff
            print(json.dumps({"draw": seed, "share_left_out": args.share, **{
                f"largest_change_points_{c}": round(float(diff[c].abs().max()), 2) for c in COLUMNS}}))
    both = pd.concat(moved.values()).abs().groupby(level="policy").max()
    print("\n| policy | largest change, " + " | ".join(COLUMNS.values()) + " (points) |")
    print("| --- | " + " | ".join("---" for _ in COLUMNS) + " |")
    for policy, row in both.iterrows():
        print(f"| `{policy}` | " + " | ".join(f"{row[c]:.2f}" for c in COLUMNS) + " |")


if __name__ == "__main__":
    main()
