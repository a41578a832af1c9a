"""`pond features` from a local folder against the same tables in an S3 bucket (`--raw s3://...`),
both engines, the dask engine's scratch folder in a bucket too (`POND_SCRATCH=s3://...`; with a local
`--raw`, the stage first copies the tables there). The store
is a local S3 server (moto), so the figures are the fsspec/S3 protocol's cost on this machine, not a
network's. Every run's tables must equal the local folder's; each run is its own `pond` process,
timed with GNU time (wall, peak RSS of the stage's process).

    python -m benchmarks.storage_urls [--raw data/raw] [--engines local dask]
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("vm_features.parquet", "snapshot/customer_percentiles.parquet", "snapshot/workload_history.parquet",
          "snapshot/request_shapes.parquet", "workload_features.parquet")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], env=env, capture_output=True, text=True, cwd=ROOT,
                       check=False)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    wall, kb = r.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kb) / 2 ** 20, r.stdout


def same(first: Path, *others: Path) -> bool:
    return all(pd.read_parquet(first / t).equals(pd.read_parquet(o / t)) for o in others for t in TABLES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path, default=ROOT / "data" / "raw")
    ap.add_argument("--engines", nargs="+", default=["local", "dask"], choices=["local", "dask"])
    args = ap.parse_args()

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
               AWS_ENDPOINT_URL=f"http://{host}:{port}", POND_QUIET="1")
    os.environ.update(env)
    fs = s3fs.S3FileSystem()
    fs.mkdir("raw")
    fs.mkdir("scratch")
    fs.put(f"{args.raw.resolve()}/", "raw/fleet/", recursive=True)
    print(f"bucket: {len(fs.find('raw/fleet'))} files, {fs.du('raw/fleet') / 2**20:.1f} MiB of {args.raw}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            for engine in args.engines:
                outs = {}
                runs = [("local folder", str(args.raw.resolve()), None), ("s3://", "s3://raw/fleet", "s3://scratch/bench")]
                if engine == "dask":     # the local tables copied to a scratch bucket for the workers first
                    runs.append(("local folder, scratch s3://", str(args.raw.resolve()), "s3://scratch/bench"))
                for where, raw, scratch in runs:
                    out = Path(tmp) / f"{engine}-{len(outs)}"
                    run_env = dict(env, **({"POND_SCRATCH": scratch} if scratch and engine == "dask" else {}))
                    wall, peak, _ = timed([sys.executable, "-m", "pond.pipelines.cli", "--engine", engine, "features",
                                           "--raw", raw, "--out", str(out / "f"), "--metrics", str(out / "m.json")],
                                          run_env)
                    outs[where] = out / "f"
                    rows.append((engine, where, wall, peak))
                fs.invalidate_cache()
                left = fs.find("scratch")
                print(f"{engine}: tables equal: {same(*outs.values())}; scratch bucket left: {len(left)} files")
            print("| engine | --raw | wall | peak RSS of the stage's process |\n| --- | --- | --- | --- |")
            for engine, where, wall, peak in rows:
                print(f"| {engine} | {where} | {wall:.1f} s | {peak:.2f} GiB |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
