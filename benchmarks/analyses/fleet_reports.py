"""The fleet's slowdown reports (`vm_slowdowns`) on the saved nights of finished acceptance runs.

    python -m benchmarks.analyses.fleet_reports /tmp/pond-bv-43n ... [--variants pond walks] [--shares 0.1 0.2]

``generate.fleet.internal_share`` adds `vm_slowdowns` to a fleet and changes nothing else in it (the same VMs,
counters and lab: `tests/data/test_fleet.py`), so the models and nights of a run made without reports are those of a
run made with them, and only `optimize`'s choice differs. Per run and share, this writes the reports the generator
would have written (`telemetry.fleet.vms.build_vm_slowdowns`, the run's params) into a view of the run under
``--out`` (links to its ``backtest``, ``features``, ``li``, ``params.yaml`` and raw tables, beside the reports), and
re-chooses every night with this checkout's solver as `resolve_runs.py` does, lab only and with the reports.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.analyses.regret_anatomy import replay, summary
from pond.core.params import load
from pond.telemetry.fleet import build_lab, build_vms
from pond.telemetry.fleet.vms import build_vm_slowdowns


def view(wd: Path, share: float, out: Path) -> tuple[Path, int]:
    """A folder laid out as ``wd`` whose raw tables also hold the reports at ``share``; (it, report rows)."""
    params = load(wd / "params.yaml")
    g = params.generate
    lab = build_lab(g.lab, g.variant)
    fleet = g.fleet.model_copy(update={"internal_share": share})
    reports = build_vm_slowdowns(build_vms(lab, fleet, g.variant), lab, fleet, g.lab)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    for name in ("backtest", "features", "li", "params.yaml"):
        if not (out / name).exists():
            (out / name).symlink_to((wd / name).resolve())
    for f in (wd / "raw").iterdir():
        if not (out / "raw" / f.name).exists() and not f.name.startswith("vm_slowdowns"):
            (out / "raw" / f.name).symlink_to(f.resolve())
    reports.to_parquet(out / "raw" / "vm_slowdowns.parquet", index=False)
    return out, len(reports)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdirs", nargs="+", type=Path)
    ap.add_argument("--variants", nargs="+", default=["pond", "walks"])
    ap.add_argument("--shares", nargs="+", type=float, default=[0.2])
    ap.add_argument("--out", type=Path, default=Path("/tmp/pond-fleet-reports"))
    a = ap.parse_args()
    for wd in a.workdirs:
        for v in a.variants:
            r = replay(wd / v)
            print(f"{wd.name} {v}: the lab only: {summary(r, [r.resolve(n) for n in r.nights])}", flush=True)
            for share in a.shares:
                d, rows = view(wd / v, share, a.out / wd.name / f"{v}-{share:g}")
                r = replay(d)
                print(f"  {share:.0%} of customers internal ({rows:,} report rows): "
                      f"{summary(r, [r.resolve(n) for n in r.nights])}", flush=True)


if __name__ == "__main__":
    main()
