"""`pond <stage>`: one command per pipeline stage (the same ones dvc.yaml runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from telemetry.errors import PondError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pond", description=__doc__)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default: params.yaml)")
    sub = ap.add_subparsers(dest="stage", required=True, metavar="STAGE")

    g = sub.add_parser("generate", help="build the built-in lab and VM fleet into data/raw")
    g.add_argument("--out", type=Path, default=Path("data/raw"))

    i = sub.add_parser("import", help="validate real telemetry and write it to data/raw")
    i.add_argument("contract_dir", type=Path, nargs="?", help="directory of contract tables (CSV or Parquet)")
    i.add_argument("--perf-dir", type=Path, help="directory of `perf stat -x,` files, one per lab run")
    i.add_argument("--perf-meta", type=Path, help="CSV: file, workload_id, workload_class, footprint_gb")
    i.add_argument("--azure-vmtable", type=Path, help="Azure Public Dataset V2 vmtable CSV")
    i.add_argument("--out", type=Path, default=Path("data/raw"))

    f = sub.add_parser("features", help="TMA features, customer percentiles, workload history, snapshot")
    f.add_argument("--raw", type=Path, default=Path("data/raw"))
    f.add_argument("--out", type=Path, default=Path("data/features"))
    f.add_argument("--metrics", type=Path, default=Path("metrics/features.json"))

    c = sub.add_parser("calibrate", help="compare the fleet with the published figures")
    c.add_argument("--raw", type=Path, default=Path("data/raw"))
    c.add_argument("--features", type=Path, default=Path("data/features"))
    c.add_argument("--metrics", type=Path, default=Path("metrics/calibration.json"))
    c.add_argument("--plots", type=Path, default=Path("plots/calibration"))

    t = sub.add_parser("train_li", help="latency-insensitivity forest: held-out curves, baselines, ONNX, MLflow")
    t.add_argument("--features", type=Path, default=Path("data/features"))
    t.add_argument("--raw", type=Path, default=Path("data/raw"))
    t.add_argument("--out", type=Path, default=Path("data/models/li"))
    t.add_argument("--metrics", type=Path, default=Path("metrics/train_li.json"))
    t.add_argument("--plots", type=Path, default=Path("plots/train_li"))

    u = sub.add_parser("train_um", help="untouched-memory quantile GBM: backtest, trade-off, calibration, ONNX, MLflow")
    u.add_argument("--features", type=Path, default=Path("data/features"))
    u.add_argument("--out", type=Path, default=Path("data/models/um"))
    u.add_argument("--metrics", type=Path, default=Path("metrics/train_um.json"))
    u.add_argument("--plots", type=Path, default=Path("plots/train_um"))

    o = sub.add_parser("optimize", help="solve Pond Eq. (1) on the held-out curves; write policy.json and the frontier")
    o.add_argument("--li", type=Path, default=Path("data/models/li"))
    o.add_argument("--um", type=Path, default=Path("data/models/um"))
    o.add_argument("--features", type=Path, default=Path("data/features"))
    o.add_argument("--out", type=Path, default=Path("data/policy/policy.json"))
    o.add_argument("--metrics", type=Path, default=Path("metrics/optimize.json"))
    o.add_argument("--frontier", type=Path, default=Path("plots/optimize/frontier.csv"))
    o.add_argument("--plot", type=Path, default=Path("plots/optimize/frontier.png"))

    e = sub.add_parser("evaluate", help="apply the policy to the next day's VMs; compare with LI-only, UM-only, static")
    e.add_argument("--policy", type=Path, default=Path("data/policy/policy.json"))
    e.add_argument("--li", type=Path, default=Path("data/models/li"))
    e.add_argument("--um", type=Path, default=Path("data/models/um"))
    e.add_argument("--features", type=Path, default=Path("data/features"))
    e.add_argument("--raw", type=Path, default=Path("data/raw"))
    e.add_argument("--out", type=Path, default=Path("data/evaluation"))
    e.add_argument("--metrics", type=Path, default=Path("metrics/evaluate.json"))
    e.add_argument("--plots", type=Path, default=Path("plots/evaluate"))
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.stage == "import":
            from pipelines import ingest
            ingest.run(args.out, args.contract_dir, args.perf_dir, args.perf_meta, args.azure_vmtable)
            return 0
        if args.stage == "calibrate":
            from pipelines import calibrate
            calibrate.run(args.raw, args.features, args.metrics, args.plots)
            return 0
        from pipelines.params import load
        params = load(args.params)
        if args.stage == "generate":
            from pipelines import generate
            generate.run(params, args.out)
        elif args.stage == "features":
            from pipelines import features
            features.run(params, args.raw, args.out, args.metrics)
        elif args.stage == "train_li":
            from pipelines import train_li
            train_li.run(params, args.features, args.raw, args.out, args.metrics, args.plots)
        elif args.stage == "train_um":
            from pipelines import train_um
            train_um.run(params, args.features, args.out, args.metrics, args.plots)
        elif args.stage == "optimize":
            from pipelines import optimize
            optimize.run(params, args.li, args.um, args.features, args.out, args.metrics, args.frontier, args.plot)
        elif args.stage == "evaluate":
            from pipelines import evaluate
            evaluate.run(args.policy, args.li, args.um, args.features, args.raw, args.out, args.metrics, args.plots)
    except PondError as exc:
        print(f"pond {args.stage}: error: {exc}", file=sys.stderr)
        return 2
    except (MemoryError, duckdb.OutOfMemoryException) as exc:
        print(f"pond {args.stage}: error: out of memory ({exc}). Fix: raise POND_DUCKDB_MEMORY "
              "(default 2GB) or run on a machine with more memory", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
