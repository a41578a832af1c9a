from __future__ import annotations

import fcntl
import gc
import os
import shutil
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pond.telemetry.fleet import FleetParams, LabParams, generate
from pond.telemetry.io import read_tables

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """OpenMP's idle threads spin briefly, as every `pond` command has them (``core.runtime``): the test processes
    share the cores, and spinning threads of one stall the fits of the other. Set before any test loads OpenMP
    (LightGBM, scikit-learn), which reads it once; the commands tests start inherit it."""
    from pond.core.runtime import Runtime

    os.environ.update(Runtime.openmp())


def _packages() -> tuple[str, ...]:
    """The project's packages as folders, in pyproject's order (the one list the structural tests walk)."""
    import tomllib

    names = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return tuple(n.split(".")[1] for n in names if n.count(".") == 1)


PACKAGES = _packages()
FIXTURES = ROOT / "tests" / "fixtures"
# The unit tests' fleet keeps the footprint shape their figures were worked out on; the pipeline tests
# (small_params) and the slow fleet checks run the default shape, azure.
SMALL_FLEET = FleetParams(seed=5, n_days=12, vms_per_day=300, n_customers=120, new_customers_per_day=2,
                          shape="footprint")


@pytest.fixture(autouse=True)
def _unfreeze_heap():
    """A loaded service freezes its heap (``serving.reload.settle_heap``). A test process outlives many services, so
    each test hands what it froze back to the collector (else it is never freed, and DuckDB's bindings complain at
    exit)."""
    yield
    gc.unfreeze()


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A session fixture's folder built once for the whole run: under xdist every worker would build its own (the
    small night takes about a minute), so the first worker to ask builds it under a lock and the others wait for it.
    The folder is read-only to the tests, as a session fixture's output already is to the tests of one worker."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                           # the run's folder, above each worker's own
    out = base / f"built-{name}"
    with open(base / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / ".built").exists():            # a worker that failed to build leaves no mark: build again
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            build(out)
            (out / ".built").touch()
    return out


def _raw(tmp_path_factory, name: str, fleet: FleetParams = SMALL_FLEET, variant: str = "pond") -> Path:
    return built_once(tmp_path_factory, name,
                      lambda d: generate(LabParams(seed=5, repetitions=2), fleet, d / "raw", variant=variant)) / "raw"


@pytest.fixture(scope="session")
def small_raw(tmp_path_factory) -> Path:
    return _raw(tmp_path_factory, "raw")


@pytest.fixture(scope="session")
def small_walks_raw(tmp_path_factory) -> Path:
    """The same small fleet under the `walks` mechanisms (CI runs both variants)."""
    return _raw(tmp_path_factory, "raw_walks", variant="walks")


@pytest.fixture(scope="session")
def small_reports_raw(tmp_path_factory) -> Path:
    """The same small fleet with a third of its customers internal: their VMs report slowdowns (vm_slowdowns)."""
    return _raw(tmp_path_factory, "raw_reports", FleetParams(**{**SMALL_FLEET.__dict__, "internal_share": 0.3}))


@pytest.fixture(scope="session")
def small_tables(small_raw) -> dict[str, pd.DataFrame]:
    return read_tables(small_raw)


@pytest.fixture()
def tables(small_tables) -> dict[str, pd.DataFrame]:
    return {k: v.copy() for k, v in small_tables.items()}


SMALL_AS_OF = "2026-01-08"


def small_params(variant: str = "pond") -> dict:
    """params.yaml shrunk for SMALL_FLEET: the as-of day leaves 4 days to evaluate on."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["generate"]["variant"] = variant
    params["generate"]["fleet"].update(n_days=SMALL_FLEET.n_days, vms_per_day=SMALL_FLEET.vms_per_day,
                                       n_customers=SMALL_FLEET.n_customers)
    params["base"].update(seed=SMALL_FLEET.seed, as_of=SMALL_AS_OF)
    params["train_li"].update(n_splits=5, select_splits=3, cv_folds=3, oof_repeats=1)
    params["train_monitor"].update(folds=2, inner_folds=2)
    params["train_um"].update(train_days=6, calib_days=1, calib_lag_days=1, backtest_nights=3, alphas=[0.01, 0.1])
    params["backtest"] = {"nights": 2}
    params["optimize"]["serve"] = "um_only"      # a night without simulate's answer: the operator's choice, pinned
    return params


# The replay's grid for tests of wiring and parity, not of figures (the engine and storage parity tests, the
# end-to-end `dvc repro`): the same code paths (pool sizes that nest, static and capped policies, both latency ratios)
# over about a third of the configurations. A Dask replay of the full grid took 77 s beside the other test worker.
SMALL_GRID = {"pool_sockets": [2, 4, 8], "static_fractions": [0.1, 0.5], "pool_caps": [0.1]}


def run_pond(argv: list[str]) -> int:
    """The installed ``pond`` command (its console-script entry point), run in this process: tests drive a
    stage as an operator does, and no test imports a module of ``pipelines/`` (tests/unit/test_import_root.py)."""
    from importlib.metadata import entry_points

    (command,) = entry_points(group="console_scripts", name="pond")
    return command.load()(argv)


def params_file(path: Path, params: dict) -> Path:
    """``params`` as a params.yaml at ``path``, for ``pond --params``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(params))
    return path


NIGHT = ("features", "train_li", "train_monitor", "train_um", "optimize", "evaluate")


def run_night(raw: Path, wd: Path, stages: tuple[str, ...] = NIGHT, variant: str = "pond") -> Path:
    """The nightly stages on ``raw`` with small_params(), in-process, outputs under ``wd``."""
    params_file(wd / "params.yaml", small_params(variant))
    argv = {
        "features": ["--raw", str(raw), "--out", str(wd / "features"), "--metrics", str(wd / "f.json")],
        "train_li": ["--features", str(wd / "features"), "--raw", str(raw), "--out", str(wd / "li"),
                     "--metrics", str(wd / "li.json"), "--plots", str(wd / "plots")],
        "train_monitor": ["--raw", str(raw), "--out", str(wd / "monitor"), "--metrics", str(wd / "monitor.json"),
                          "--plots", str(wd / "plots")],
        "train_um": ["--features", str(wd / "features"), "--out", str(wd / "um"),
                     "--metrics", str(wd / "um.json"), "--plots", str(wd / "plots")],
        "optimize": ["--li", str(wd / "li"), "--um", str(wd / "um"), "--features", str(wd / "features"),
                     "--raw", str(raw), "--out", str(wd / "policy.json"), "--metrics", str(wd / "o.json"),
                     "--frontier", str(wd / "plots/frontier.csv"), "--plot", str(wd / "plots/frontier.png"),
                     "--monitor", str(wd / "monitor")],
        "evaluate": ["--policy", str(wd / "policy.json"), "--li", str(wd / "li"), "--um", str(wd / "um"),
                     "--features", str(wd / "features"), "--raw", str(raw), "--out", str(wd / "evaluation"),
                     "--metrics", str(wd / "e.json"), "--plots", str(wd / "plots"), "--monitor", str(wd / "monitor")],
    }
    for stage in stages:
        assert run_pond(["--params", str(wd / "params.yaml"), stage, *argv[stage]]) == 0, stage
    return wd


@contextmanager
def own_mlflow(wd: Path):
    """A session fixture's MLflow store of its own (monkeypatch is function-scoped)."""
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{wd / 'mlflow.db'}"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = old


def _night(raw: Path, variant: str) -> Callable[[Path], None]:
    def build(wd: Path) -> None:
        with own_mlflow(wd):
            run_night(raw, wd, variant=variant)
    return build


@pytest.fixture(scope="session")
def small_bundle(tmp_path_factory, small_raw) -> Path:
    """features -> train_li -> train_um -> optimize -> evaluate on the small fleet, in-process."""
    return built_once(tmp_path_factory, "bundle", _night(small_raw, "pond"))


@pytest.fixture(scope="session")
def small_walks_bundle(tmp_path_factory, small_walks_raw) -> Path:
    """The same night on the `walks` variant's small fleet."""
    return built_once(tmp_path_factory, "bundle_walks", _night(small_walks_raw, "walks"))


@pytest.fixture(scope="session")
def small_backtest(tmp_path_factory, small_raw, small_bundle) -> Path:
    """`pond backtest` (2 nights ending at SMALL_AS_OF) on the small fleet; its per-night outputs."""
    def build(wd: Path) -> None:
        with own_mlflow(wd):
            assert run_pond(["--params", str(params_file(wd / "params.yaml", small_params())), "backtest",
                             *backtest_args(small_raw, small_bundle, wd)]) == 0
    return built_once(tmp_path_factory, "backtest", build) / "out"


def backtest_args(raw: Path, bundle: Path, wd: Path) -> list[str]:
    """``pond backtest``'s paths: inputs from ``raw`` and a night's ``bundle``, outputs under ``wd``."""
    return ["--raw", str(raw), "--features", str(bundle / "features"), "--li", str(bundle / "li"),
            "--out", str(wd / "out"), "--plots", str(wd / "plots"), "--metrics", str(wd / "backtest.json"),
            "--monitor", str(bundle / "monitor")]


def params_paths() -> dict[type, str]:
    """Each params section class and its dotted path in params.yaml (``generate.lab``, ``simulate``, ...)."""
    from pond.core.params import Params, Section

    out: dict[type, str] = {}

    def walk(cls: type, prefix: str) -> None:
        for name, field in cls.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, Section):
                out[ann] = f"{prefix}{name}"
                walk(ann, f"{prefix}{name}.")

    walk(Params, "")
    return out


@contextmanager
def params_reads():
    """While open, every field of a params section that project code reads (outside ``core/params.py``, whose
    validators read across sections to refuse an inconsistent file) is recorded as the key ``dvc.yaml`` would
    declare: ``simulate.buy_days``; a field ``base`` hands to a section (``features.as_of``) as ``base.as_of``.
    Yields ``run(argv)``: ``run_pond``, recording under the stage the argv names; and ``reads``, per stage its keys.
    Reads through ``model_dump`` are not seen (pydantic dumps in Rust): a section dumped whole must be declared
    whole by the stage, which this cannot check."""
    import sys

    from pond.core import params as params_module
    from pond.core.params import INJECTED, Section

    paths, injected = params_paths(), {(".".join(p), k) for p, k in INJECTED.items()}
    # Where the imported package lives, not this checkout: a worktree's tests run against the venv's install.
    own = str(Path(params_module.__file__))
    root = str(Path(own).parents[1])
    reads: dict[str, set[str]] = {}
    current: list[set[str]] = []
    plain, had = Section.__getattribute__, "__getattribute__" in Section.__dict__

    def spy(self, name):
        cls = type(self)
        if current and name in cls.model_fields and cls in paths:
            where = sys._getframe(1).f_code.co_filename
            if where.startswith(root) and where != own and "/tests/" not in where:
                path = paths[cls]
                current[-1].add(f"base.{name}" if (path, name) in injected else f"{path}.{name}")
        return plain(self, name)

    def run(argv: list[str]) -> int:
        stage = next(a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] != "--params"))
        current.append(reads.setdefault(stage, set()))
        try:
            return run_pond(argv)
        finally:
            current.pop()

    Section.__getattribute__ = spy
    try:
        yield run, reads
    finally:
        if had:
            Section.__getattribute__ = plain
        else:
            del Section.__getattribute__


def undeclared(stage: str, keys: set[str], dvc_yaml: dict) -> list[str]:
    """The keys ``stage`` read that its ``params`` in ``dvc.yaml`` do not cover (a section covers its keys)."""
    declared = dvc_yaml["stages"][stage].get("params", [])
    return sorted(k for k in keys if not any(k == d or k.startswith(f"{d}.") for d in declared))


def stage_argv(wd: Path, raw: Path) -> list[list[str]]:
    """The stages of dvc.yaml after generate, in its order, on the tables in ``raw``, with every output under ``wd``
    (metrics in ``wd/m``, named as `register --metrics-dir` reads them)."""
    m = wd / "m"
    common = ["--li", str(wd / "li"), "--um", str(wd / "um"), "--features", str(wd / "features")]
    return [
        ["features", "--raw", str(raw), "--out", str(wd / "features"), "--metrics", str(m / "features.json")],
        ["calibrate", "--raw", str(raw), "--features", str(wd / "features"), "--metrics", str(m / "calibration.json"),
         "--plots", str(wd / "plots/cal")],
        ["train_li", "--features", str(wd / "features"), "--raw", str(raw), "--out", str(wd / "li"),
         "--metrics", str(m / "train_li.json"), "--plots", str(wd / "plots")],
        ["train_monitor", "--raw", str(raw), "--out", str(wd / "monitor"), "--metrics", str(m / "train_monitor.json"),
         "--plots", str(wd / "plots")],
        ["train_um", "--features", str(wd / "features"), "--out", str(wd / "um"), "--metrics", str(m / "train_um.json"),
         "--plots", str(wd / "plots")],
        ["optimize", *common, "--raw", str(raw), "--out", str(wd / "policy.json"), "--metrics", str(m / "optimize.json"),
         "--frontier", str(wd / "plots/frontier.csv"), "--plot", str(wd / "plots/frontier.png"),
         "--monitor", str(wd / "monitor")],
        ["evaluate", "--policy", str(wd / "policy.json"), *common, "--raw", str(raw), "--out", str(wd / "evaluation"),
         "--metrics", str(m / "evaluate.json"), "--plots", str(wd / "plots"), "--monitor", str(wd / "monitor")],
        ["backtest", "--raw", str(raw), "--features", str(wd / "features"), "--li", str(wd / "li"),
         "--out", str(wd / "backtest"), "--plots", str(wd / "plots/bt"), "--metrics", str(m / "backtest.json"),
         "--monitor", str(wd / "monitor")],
        ["simulate", "--raw", str(raw), "--nightly", str(wd / "backtest"), "--out", str(wd / "sim"),
         "--metrics", str(m / "simulate.json"), "--plots", str(wd / "plots/sim")],
        ["register", "--policy", str(wd / "policy.json"), *common, "--raw", str(raw), "--metrics-dir", str(m),
         "--out", str(wd / "bundle"), "--metrics", str(m / "register.json"), "--monitor", str(wd / "monitor")],
    ]
