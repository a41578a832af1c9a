"""How much memory the built-in fleet holds alive, day by day, with and without a burn-in:

    python -m benchmarks.alive_memory --n-days 42 --burn-in 0 60     # a few seconds a fleet

Builds the fleet as `pond generate` does (``generate.lab`` and ``generate.fleet`` of params.yaml as committed, with
``base.seed``, ``n_days`` and ``burn_in_days`` set) and prints one line per burn-in: the VMs, those created before
the trace's first day, and the TB of memory alive at 00:00 every ``--every`` days. A trace that opens empty climbs
for weeks; one that opens on a running fleet starts near the level it keeps.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from pond.core.params import FleetParams, LabParams
from pond.telemetry.fleet.lab import build_lab
from pond.telemetry.fleet.vms import build_vms

ROOT = Path(__file__).resolve().parents[1]


def alive_tb(vms: pd.DataFrame, days: pd.DatetimeIndex) -> np.ndarray:
    """TB of memory alive at each of ``days``: created at or before it and not yet deleted."""
    created, deleted = (vms[c].dt.tz_convert(None).to_numpy() for c in ("created_at", "deleted_at"))
    at = days.tz_convert(None).to_numpy()[:, None]
    alive = (created[None, :] <= at) & (np.isnat(deleted)[None, :] | (deleted[None, :] > at))
    return alive.astype(float) @ vms.memory_gb.to_numpy() / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="base.seed (default: params.yaml's)")
    ap.add_argument("--n-days", type=int, default=None, help="generate.fleet.n_days (default: params.yaml's)")
    ap.add_argument("--burn-in", type=int, nargs="+", default=[0, 60], help="generate.fleet.burn_in_days values")
    ap.add_argument("--every", type=int, default=3, help="days between the printed days")
    a = ap.parse_args()
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    gen = params["generate"]
    seed = params["base"]["seed"] if a.seed is None else a.seed
    lab = build_lab(LabParams(**gen["lab"], seed=seed), gen.get("variant", "pond"))
    for burn_in in a.burn_in:
        fleet = FleetParams(**{**gen["fleet"], "seed": seed, "burn_in_days": burn_in,
                               **({} if a.n_days is None else {"n_days": a.n_days})})
        vms = build_vms(lab, fleet, gen.get("variant", "pond"))
        first = pd.Timestamp(fleet.start, tz="UTC")
        days = pd.date_range(first, first + pd.Timedelta(days=fleet.n_days), freq=f"{a.every}D")
        tb = alive_tb(vms, days)
        print(f"burn_in_days {burn_in}: {len(vms):,} VMs, {int((vms.created_at < first).sum()):,} created before "
              f"{fleet.start}; TB alive on day " + ", ".join(f"{(d - first).days}: {t:.0f}" for d, t in zip(days, tb)))


if __name__ == "__main__":
    main()
