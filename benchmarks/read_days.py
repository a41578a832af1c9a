"""Peak memory of reading one day of a fleet-sized ``vm_features.parquet``: the whole file then a
mask (what `evaluate`, `register` and `optimize` did), against ``telemetry.io.read_days`` (row
groups whose statistics rule the day out are skipped). Each read runs in its own child process,
measured by GNU time's maximum resident set size.

    python -m benchmarks.read_days [--features /tmp/pond-bench/features/vm_features.parquet] [--day 2026-02-15]

The default file is the 1M-VM fleet `benchmarks/stage_1m.py` builds; it is rewritten once with
``ROW_GROUP`` rows per group, as `pond features` writes it now.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import datetime, pandas as pd
from pond.telemetry.io import read_days
p, d = {path!r}, datetime.date.fromisoformat({day!r})
v = pd.read_parquet(p) if {whole} else read_days(p, d, d)
v = v[v.day == d]
print(len(v))
"""


def peak(path: Path, day: str, whole: bool) -> tuple[int, float, float]:
    code = CHILD.format(path=str(path), day=day, whole=whole)
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", sys.executable, "-c", code], capture_output=True, text=True,
                       check=True)
    wall, kb = r.stderr.strip().splitlines()[-1].split()
    return int(r.stdout.strip()), float(wall), int(kb) / 2 ** 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", type=Path, default=Path("/tmp/pond-bench/features/vm_features.parquet"))
    ap.add_argument("--day", default="2026-02-15")
    a = ap.parse_args()
    import pandas as pd
    import pyarrow.parquet as pq

    from pond.telemetry.io import ROW_GROUP

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vm_features.parquet"
        pd.read_parquet(a.features).to_parquet(path, index=False, row_group_size=ROW_GROUP)
        meta = pq.ParquetFile(path).metadata
        print(f"{a.features}: {meta.num_rows:,} VMs in {meta.num_row_groups} row groups; one day: {a.day}")
        for whole in (True, False):
            n, wall, gb = peak(path, a.day, whole)
            what = "whole file, then a mask" if whole else "read_days (row groups skipped)"
            print(f"  {what:32s} {n:,} VMs  {wall:.2f} s  peak RSS {gb:.2f} GB")


if __name__ == "__main__":
    main()
