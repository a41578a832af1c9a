"""Stage `generate`: the built-in lab and fleet, written as contract tables to data/raw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.params import fleet_params, lab_params
from telemetry.fleet import generate


def run(params: dict[str, Any], out_dir: Path) -> dict[str, int]:
    counts = generate(lab_params(params), fleet_params(params), out_dir)
    print(f"generate: wrote {counts} to {out_dir}")
    return counts
