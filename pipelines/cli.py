"""`pond <stage>`: one command per pipeline stage (the same ones dvc.yaml runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pond.core.errors import ConfigError, PondError, resource_error
from pond.core.progress import QUIET_ENV, environ
from pond.core.runtime import Runtime

if TYPE_CHECKING:
    from pond.core.params import Params


# what a stage only reads: a local path or a storage URL (telemetry.storage)
URL_OPTIONS = ("raw", "perf_dir", "perf_meta", "perf_vm_meta", "azure_vmtable")


def _location(value: str):
    """A local path, or a storage URL (``s3://bucket/raw``) read through fsspec."""
    from pond.telemetry.storage import location
    try:
        return location(value)
    except PondError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _paths(parser: argparse.ArgumentParser, **defaults: str) -> None:
    """One ``--name PATH`` option per keyword (underscores become dashes); ``URL_OPTIONS`` also take a URL."""
    for name, default in defaults.items():
        kind = _location if name in URL_OPTIONS else Path
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None if default is None else kind(default),
                            help="a path or a storage URL" if kind is _location else "a path")


GLOBAL_DEFAULTS = {"params": Path("params.yaml"), "quiet": False, "engine": None, "scheduler": None}


def _global_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    """The options every command takes, before or after its name (``pond simulate ... --params p.yaml``).
    A command's parser has no defaults of its own (``SUPPRESS``), so an option given before the name is not
    reset by the command's parser."""
    def default(name: str) -> object:
        return GLOBAL_DEFAULTS[name] if defaults else argparse.SUPPRESS
    parser.add_argument("--params", type=Path, default=default("params"), help="params file (default: params.yaml)")
    parser.add_argument("--quiet", action="store_true", default=default("quiet"),
                        help="no progress lines (same as POND_QUIET=1)")
    parser.add_argument("--engine", choices=("local", "dask"), default=default("engine"),
                        help="overrides params engine.backend")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=default("scheduler"),
                        help="a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (same as DASK_SCHEDULER_ADDRESS); "
                             "without it the dask engine starts a LocalCluster")


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: the global options are its own too."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _global_options(self, defaults=False)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pond", description=__doc__)
    _global_options(ap, defaults=True)
    sub = ap.add_subparsers(dest="stage", required=True, metavar="STAGE", parser_class=_CommandParser)
    g = sub.add_parser("generate", help="build the built-in lab and VM fleet into data/raw")
    _paths(g, out="data/raw")
    partitioned = "write vms and vm_counters as Parquet datasets partitioned by creation day and cluster (vms/created_day=.../cluster=.../)"
    g.add_argument("--partitioned", action="store_true", help=partitioned)
    i = sub.add_parser("import", help="validate real telemetry and write it to data/raw",
                       description="--perf-dir: one `perf stat -x,` file per lab run; --perf-meta: CSV with columns "
                                   "file, workload_id, workload_class, footprint_gb (and latency_ratio, spilled_pct for "
                                   "a run with memory on the pool); --perf-vm-meta: CSV with columns file, vm_id, "
                                   "latency_ratio, pool_gb, measured_at, one file per window a VM was counted on a "
                                   "pool (vm_pool_counters); --azure-vmtable: Azure V2 vmtable CSV")
    i.add_argument("contract_dir", type=_location, nargs="?",
                   help="directory of contract tables (CSV or Parquet), a local path or a storage URL (s3://...)")
    _paths(i, perf_dir=None, perf_meta=None, perf_vm_meta=None, azure_vmtable=None, out="data/raw")
    i.add_argument("--partial", action="store_true",
                   help="replace only the tables given in the set already at --out; the whole set is validated again")
    i.add_argument("--partitioned", action="store_true", help=partitioned)
    _paths(sub.add_parser("features", help="TMA features, customer percentiles, workload history, snapshot"),
           raw="data/raw", out="data/features", metrics="metrics/features.json")
    _paths(sub.add_parser("calibrate", help="compare the fleet with the published figures"),
           raw="data/raw", features="data/features", metrics="metrics/calibration.json", plots="plots/calibration")
    _paths(sub.add_parser("train_li", help="latency-insensitivity forest: held-out curves, baselines, ONNX, MLflow"),
           features="data/features", raw="data/raw", out="data/models/li", metrics="metrics/train_li.json",
           plots="plots/train_li")
    _paths(sub.add_parser("train_monitor", help="QoS monitor's model from the lab's spill runs: held-out flags, ONNX"),
           raw="data/raw", out="data/models/monitor", metrics="metrics/train_monitor.json", plots="plots/train_monitor")
    _paths(sub.add_parser("train_um", help="untouched-memory quantile GBM: backtest, trade-off, calibration, ONNX, MLflow"),
           features="data/features", out="data/models/um", metrics="metrics/train_um.json", plots="plots/train_um")
    _paths(sub.add_parser("optimize", help="solve Pond Eq. (1) on the held-out curves; write policy.json and the frontier"),
           li="data/models/li", um="data/models/um", features="data/features", raw="data/raw",
           out="data/policy/policy.json", metrics="metrics/optimize.json", frontier="plots/optimize/frontier.csv",
           plot="plots/optimize/frontier.png", answer="metrics/simulate.json", monitor="data/models/monitor")
    _paths(sub.add_parser("evaluate", help="apply the policy to the next day's VMs; compare with LI-only, UM-only, static"),
           policy="data/policy/policy.json", li="data/models/li", um="data/models/um", features="data/features",
           raw="data/raw", out="data/evaluation", metrics="metrics/evaluate.json", plots="plots/evaluate",
           monitor="data/models/monitor")
    sim = sub.add_parser("simulate", help="DRAM a provider buys with pools vs all local, steady state; pool sizing")
    _paths(sim, raw="data/raw", nightly="data/backtest", out="data/simulate", metrics="metrics/simulate.json",
           plots="plots/simulate")
    sim.add_argument("--static-only", action="store_true",
                     help="static pools only, no nightly models (an imported trace without model inputs)")
    sim.add_argument("--pack-by", default="cluster_id", metavar="COLUMN",
                     help="vms column grouping servers and pools when the trace names no servers (Azure V2: region)")
    _paths(sub.add_parser("register", help="log the night's bundle as a registered model version; promotion gate"),
           policy="data/policy/policy.json", li="data/models/li", um="data/models/um", features="data/features",
           raw="data/raw", metrics_dir="metrics", out="data/bundle", metrics="metrics/register.json",
           monitor="data/models/monitor")
    c = sub.add_parser("compare", help="two registered versions (number or alias) or bundle dirs side by side")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--out", type=Path, default=Path("data/compare"), help="table, drift and curves (default data/compare)")
    c.add_argument("--no-latency", action="store_true", help="skip measuring the per-VM decision time")
    u = sub.add_parser("ui", help="the MLflow UI on the nightly job's store, with links that open on its runs")
    u.add_argument("--host", default="127.0.0.1", help="address mlflow ui listens on (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=5000, help="port of mlflow ui (default 5000)")
    u.add_argument("--print-only", action="store_true", help="print the links, start nothing")
    bt = sub.add_parser("backtest", help="replay N consecutive nights ending at base.as_of: train, optimize, evaluate")
    bt.add_argument("nights", type=int, nargs="?", help="nights to replay (default: params backtest.nights)")
    _paths(bt, raw="data/raw", features="data/features", li="data/models/li", out="data/backtest",
           plots="plots/backtest", metrics="metrics/backtest.json", monitor="data/models/monitor")
    v = sub.add_parser("validate", help="which commands a directory of telemetry can feed, before any stage runs")
    v.add_argument("directory", type=_location, nargs="?", default=Path("data/raw"),
                   help="contract tables, CSV or Parquet, a local path or a storage URL (default data/raw)")
    t = sub.add_parser("template", help="a complete telemetry directory in the contract's format (CSV), to start from")
    t.add_argument("out", type=Path, help="directory to write workloads/slowdowns/vms/vm_counters.csv into")
    t.add_argument("--days", type=int, default=21, help="days of VM creations (default 21)")
    t.add_argument("--vms-per-day", type=float, default=300, help="VM creations per day (default 300)")
    rp = sub.add_parser("report", help="tonight's headline figures as one table (and Markdown)")
    _paths(rp, metrics_dir="metrics", out="reports/tonight.md", plots_dir="plots")
    dg = sub.add_parser("decision-graph", help="the served decision as one ONNX graph (both models and the rule), "
                                             "for a scheduler that embeds it with ONNX Runtime")
    dg.add_argument("out", type=Path, help="the .onnx file to write")
    _paths(dg, policy="data/policy/policy.json", li="data/models/li", um="data/models/um")
    d = sub.add_parser("docs", help="write the generated pages: the references (configuration, command line, HTTP "
                                    "API, commands), the pipeline picture and the figures the docs quote from metrics/")
    d.add_argument("--check", action="store_true", help="write nothing; exit 1 when any page differs from what the "
                                                        "code and the metrics give")
    from pond.serving.cli import SETTING_OPTIONS, add_setting_options, environment_help
    for name, text in (("predict", "a file of VM requests -> a file of allocations (the service's engine)"),
                       ("serve", "start the HTTP service")):
        sp = sub.add_parser(name, help=text, description=f"{text}. Each option overrides its POND_* environment "
                                                          "variable, which overrides the default.",
                            epilog=environment_help() if name == "serve" else None,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        add_setting_options(sp, SETTING_OPTIONS if name == "serve" else SETTING_OPTIONS[:4])
        if name == "predict":
            sp.add_argument("requests", type=Path, help="CSV or Parquet with the vms request columns")
            sp.add_argument("--out", type=Path, required=True, help="allocations file (.parquet or .csv)")
    return ap


def _params_if_any(path: Path) -> Params | None:
    """params.yaml when there is one (then base.as_of is checked against the trace's days); a params file named
    with --params must exist."""
    from pond.core.params import load
    if path != GLOBAL_DEFAULTS["params"] and not path.exists():
        raise ConfigError(f"--params {path}: no such file; name an existing params file, or leave --params out to "
                          "use ./params.yaml when there is one")
    return load(path) if path.exists() else None


def _storage_failure(exc: BaseException) -> str | None:
    from pond.telemetry.storage import storage_failure
    return storage_failure(exc)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    values = {QUIET_ENV: "1"} if args.quiet else {}
    values.update(Runtime.openmp())
    if args.scheduler:
        from pond.core.cluster import SCHEDULER_ENV
        values[SCHEDULER_ENV] = args.scheduler
    with environ(values):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.stage == "import":
            from pond.pipelines import ingest
            ingest.run(args.out, args.contract_dir, args.perf_dir, args.perf_meta, args.azure_vmtable, args.partial,
                       _params_if_any(args.params), args.partitioned, args.perf_vm_meta)
            return 0
        if args.stage in ("predict", "serve"):
            from pond.serving import cli as serving_cli
            return serving_cli.run(args)
        if args.stage == "validate":
            from pond.pipelines import validate
            blocked = [c for c, missing in validate.run(args.directory, _params_if_any(args.params)).items()
                       if missing]
            return 1 if any(c.startswith("dvc repro") for c in blocked) else 0
        if args.stage == "decision-graph":
            from pond.models.decision_graph import for_policy
            from pond.telemetry.atomic import write_atomic
            write_atomic(args.out, for_policy(args.policy, args.li, args.um).SerializeToString())
            print(f"decision-graph: wrote {args.out} (inputs li_X, has_history, um_X, memory_gb; models/decision_graph.py)")
            return 0
        if args.stage == "docs":
            from pond.pipelines import reference
            return reference.run(args.check)
        if args.stage == "report":
            from pond.pipelines import report
            report.run(args.metrics_dir, args.out, args.plots_dir)
            return 0
        from pond.core.params import Params, load
        if args.stage == "calibrate":
            from pond.pipelines import calibrate
            params = _params_if_any(args.params)      # calibrate runs on a team's tables without a project too
            calibrate.run(args.raw, args.features, args.metrics, args.plots, (params or Params()).simulate.packing)
            return 0
        if args.stage == "template" and args.params == GLOBAL_DEFAULTS["params"] and not args.params.exists():
            params = Params().with_backend(args.engine)   # a template needs no project: the defaults
        else:
            params = load(args.params, args.engine)
        if args.stage == "template":
            from pond.pipelines import template, validate
            template.run(params, args.out, args.days, args.vms_per_day)
            validate.run(args.out, params)
        elif args.stage == "generate":
            from pond.pipelines import generate
            generate.run(params, args.out, args.partitioned)
        elif args.stage == "features":
            from pond.pipelines import features
            features.run(params, args.raw, args.out, args.metrics)
        elif args.stage == "train_li":
            from pond.pipelines import train_li
            train_li.run(params, args.features, args.raw, args.out, args.metrics, args.plots)
        elif args.stage == "train_monitor":
            from pond.pipelines import train_monitor
            train_monitor.run(params, args.raw, args.out, args.metrics, args.plots)
        elif args.stage == "train_um":
            from pond.pipelines import train_um
            train_um.run(params, args.features, args.out, args.metrics, args.plots)
        elif args.stage == "optimize":
            from pond.pipelines import optimize
            optimize.run(params, args.li, args.um, args.features, args.out, args.metrics, args.frontier, args.plot,
                         args.raw, args.answer, args.monitor)
        elif args.stage == "evaluate":
            from pond.pipelines import evaluate
            evaluate.run(args.policy, args.li, args.um, args.features, args.raw, args.out, args.metrics, args.plots,
                         params.engine, qos=params.qos, monitor_dir=args.monitor)
        elif args.stage == "register":
            from pond.models.bundle import BundlePaths
            from pond.pipelines import register
            register.run(params, BundlePaths(args.policy, args.li, args.um, args.features / "snapshot", args.monitor),
                         args.features, args.raw, args.metrics_dir, args.out, args.metrics)
        elif args.stage == "compare":
            from pond.pipelines import compare
            compare.run(params, args.a, args.b, args.out, not args.no_latency)
        elif args.stage == "ui":
            from pond.pipelines import ui
            return ui.run(params, args.host, args.port, args.print_only)
        elif args.stage == "backtest":
            from pond.pipelines import backtest
            backtest.run(params, args.nights, args.raw, args.features, args.li, args.out, args.plots, args.metrics,
                         args.monitor)
        elif args.stage == "simulate":
            from pond.pipelines import simulate
            simulate.run(params, args.raw, None if args.static_only else args.nightly, args.metrics, args.plots,
                         args.out, args.pack_by)
    except PondError as exc:
        print(f"pond {args.stage}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        why = resource_error(exc)
        if why is None:
            unreachable = _storage_failure(exc)
            if unreachable is None:
                raise
            print(f"pond {args.stage}: error: {unreachable}", file=sys.stderr)
            return 2
        print(f"pond {args.stage}: error: {why}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
