"""Stage `generate`: the built-in lab and fleet, written as contract tables to data/raw."""

from __future__ import annotations

from pathlib import Path

from pond.core.params import Params
from pond.telemetry.fleet import generate


def run(params: Params, out_dir: Path, partitioned: bool = False) -> dict[str, int]:
    counts = generate(params.generate.lab, params.generate.fleet, out_dir, params.generate.variant, partitioned)
    print(f"generate: wrote {counts} to {out_dir}")
    return counts
