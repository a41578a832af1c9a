"""Why `pond calibrate`'s lab checks pass on few draws: per seed and variant, the lab's 158 workloads
against Pond's figures, beside the 1,000-workload population they are drawn from:

    python -m benchmarks.analyses.lab_draws [--seeds 40 41 ... 49] [--sample footprint|slowdown|population]

Builds only the lab (``telemetry.fleet.lab.build_lab``, seconds per draw), with params.yaml's ``generate.lab``.
One line per (variant, seed): the lab checks that fail, and the population's full-pool slowdown shares at 182% and
222% (< 1%, 1-5%, > 25%), which the lab's sample should resemble. Then, per variant, the draws that pass every lab
check and the population's mean shares.

``--sample`` says which lab is checked, to separate the sample's part from the population's:
- ``footprint``: the lab as built (per class, systematic along the footprint);
- ``slowdown``: per class, systematic along each workload's true slowdown entirely on the pool at 182%, which no lab
  knows before it measures: the best a 158-workload sample of this population can resemble it;
- ``population``: every population workload measured, so no sample at all. The two checks that count workloads
  (``gt20pct_slowdown_at_lt3pct_dram_bound``, ``proprietary_lt1pct_count``) are for 158 workloads and are left out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import load
from pond.evaluation.calibration import lab_checks
from pond.telemetry.fleet.lab import VARIANTS, build_lab, pool_slowdown

ROOT = Path(__file__).resolve().parents[2]
COUNTS = {"gt20pct_slowdown_at_lt3pct_dram_bound", "proprietary_lt1pct_count"}


def shares(truth, ratio: float) -> list[float]:
    s = truth[(truth.spilled_pct == 100) & np.isclose(truth.latency_ratio, ratio)].slowdown_pct
    return [round(100 * float(m.mean()), 1) for m in (s < 1, (s >= 1) & (s < 5), s > 25)]


def failed_checks(lab, sample: str) -> dict[str, float]:
    if sample == "population":
        workloads = pd.concat([lab.latent[["workload_id", "workload_class"]], lab.rates], axis=1)
        checks = [c for c in lab_checks(workloads, lab.truth) if c.name not in COUNTS]
    else:
        checks = lab_checks(lab.workloads, lab.slowdowns)
    return {c.name: round(c.value, 1) for c in checks if not c.ok}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(40, 50)))
    ap.add_argument("--sample", choices=["footprint", "slowdown", "population"], default="footprint")
    args = ap.parse_args()
    lab_params = load(ROOT / "params.yaml").generate.lab
    along = (lambda lat: pool_slowdown(lat, 1.82)) if args.sample == "slowdown" else None
    for variant in VARIANTS:
        passed, population = 0, []
        for seed in args.seeds:
            lab = build_lab(lab_params.model_copy(update={"seed": seed}), variant, along)
            failed = failed_checks(lab, args.sample)
            passed += not failed
            population.append(shares(lab.truth, 1.82) + shares(lab.truth, 2.22))
            print(json.dumps({"variant": variant, "seed": seed, "sample": args.sample, "lab_checks_failed": failed,
                              "population_lt1_1to5_gt25_pct": {"182": population[-1][:3], "222": population[-1][3:]}}))
        mean = np.mean(population, axis=0).round(1).tolist()
        print(json.dumps({"variant": variant, "sample": args.sample,
                          "draws_passing_every_lab_check": f"{passed} of {len(args.seeds)}",
                          "population_mean_lt1_1to5_gt25_pct": {"182": mean[:3], "222": mean[3:]},
                          "pond_published": {"182": [26, 17, 21], "222": [23, 14, ">37"]}}))


if __name__ == "__main__":
    main()
