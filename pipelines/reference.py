"""`pond docs`: the configuration reference and the README's pipeline picture, generated.

Both are written from what the code reads (the params models of ``core.params``, the service's
``Settings``, dvc.yaml through ``dvc dag``), and ``pond docs --check`` (run by the tests) fails
when the committed files differ, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pond.core.errors import PondError
from pond.core.params import INJECTED, Params
from pond.serving.cli import SETTING_OPTIONS
from pond.serving.settings import Settings

REFERENCE = Path("docs/configuration.md")
README = Path("README.md")
DAG_BEGIN, DAG_END = "<!-- dvc dag: begin (pond docs) -->", "<!-- dvc dag: end -->"

# Variables read outside the service's Settings: (name, default, who reads it, meaning).
OTHER_ENVIRONMENT = (
    ("MLFLOW_TRACKING_URI", "sqlite:///data/mlflow/mlflow.db", "every stage, `pond serve`",
     "the MLflow tracking server and registry (`POND_MLFLOW_TRACKING_URI` wins for the service)"),
    ("POND_MLFLOW_EXPERIMENT", "pond", "train_li, train_um, backtest, register",
     "the MLflow experiment runs are logged to"),
    ("POND_DUCKDB_MEMORY", "2GB", "features, backtest (customer and workload history)",
     "DuckDB's memory cap; joins past it spill to disk"),
    ("POND_DUCKDB_TEMP", ".tmp in the working directory", "features, backtest (customer and workload history)",
     "where DuckDB spills joins past POND_DUCKDB_MEMORY; a fleet-sized join can spill tens of GB"),
    ("MLFLOW_DISABLE_TELEMETRY", "true", "train_li, train_um, backtest, register",
     "MLflow's usage telemetry stays off unless this is set to false"),
    ("POND_QUIET", "unset", "every stage (`pond --quiet`)", "1: no progress lines"),
    ("DASK_SCHEDULER_ADDRESS", "unset",
     "features, train_um, evaluate, backtest, simulate with `engine.backend: dask` (`pond --scheduler`)",
     "a running Dask scheduler (tcp://host:8786); unset: the stage starts a LocalCluster"),
    ("POND_SCRATCH", "the output's temporary folder", "features with `engine.backend: dask`",
     "where the workers exchange files: a path every worker sees, or a storage URL (s3://bucket/scratch); "
     "with a URL, raw tables on this machine's disk are copied there first"),
    ("POND_ROLE", "dev", "scripts/setup.sh", "which lock to install: serve, train or dev"),
    ("POND_TEST_WORKERS", "2", "scripts/test.sh", "processes the tests run in (pytest-xdist); 0: in one process"),
    ("PROMETHEUS_MULTIPROC_DIR", "a new temporary directory", "`pond serve --workers N` (N > 1)",
     "where the workers' metric files are summed from"),
)


def _allowed(info: FieldInfo) -> str:
    """The constraints pydantic enforces, in words."""
    bounds = []
    for m in info.metadata:
        for cls, attr, op in ((at.Ge, "ge", ">="), (at.Gt, "gt", ">"), (at.Le, "le", "<="), (at.Lt, "lt", "<")):
            if isinstance(m, cls):
                bounds.append(f"{op} {getattr(m, attr):g}")
        if isinstance(m, at.MinLen):
            bounds.append(f"length >= {m.min_length}")
    return ", ".join(bounds)


TYPE_NAMES = {"str | datetime.date": "date (YYYY-MM-DD)", "tuple[float, ...]": "list of numbers",
              "tuple[int, ...]": "list of integers", "float | None": "number or null", "float": "number",
              "int": "integer", "str": "text", "bool": "boolean"}


def _type(annotation: Any) -> str:
    if getattr(annotation, "__origin__", None) is Literal:
        return " or ".join(str(a) for a in annotation.__args__)
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return TYPE_NAMES.get(text, text)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return ""
    value = info.get_default()
    if value is None:
        return "null"
    if isinstance(value, tuple):
        return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    if hasattr(value, "get_secret_value"):
        return "(secret)"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _injected_keys() -> set[str]:
    return {".".join((*path, key)) for path, key in INJECTED.items()}


def params_rows(model: type[BaseModel] = Params, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, allowed, meaning) of every key params.yaml may set, depth first."""
    rows = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += params_rows(annotation, key + ".")
        elif key not in _injected_keys():
            rows.append((key, _type(annotation), _default(info), _allowed(info), info.description or ""))
    return rows


def settings_rows() -> list[tuple[str, str, str, str]]:
    """(variable, option, default, meaning) of every service setting."""
    options = {field: f"--{option}" for option, field, _ in SETTING_OPTIONS}
    rows = []
    for name, info in Settings.model_fields.items():
        variable = Settings.env_var(name)
        allowed = _allowed(info)
        meaning = (info.description or "") + (f" ({allowed})" if allowed else "")
        rows.append((variable, options.get(name, ""), _default(info), meaning))
    return rows


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    cell = lambda v: str(v).replace("|", "\\|")   # noqa: E731
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + \
           ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]


def render_reference() -> str:
    sections = [
        "# Configuration reference",
        "",
        "Generated by `pond docs` from `core/params.py` and `serving/settings.py`; `tests/unit/test_reference.py`",
        "fails when this file differs from what the code reads. Do not edit it by hand.",
        "",
        "## params.yaml (the pipeline)",
        "",
        "Every stage validates the whole file first: an unknown key or a value outside *allowed* stops it with an",
        "error naming the key. `generate.lab.seed`, `generate.fleet.seed` and `features.as_of` are not keys: they",
        "are set from `base.seed` and `base.as_of`. `generate` matters only to the built-in fleet.",
        "",
        *_table(("key", "type", "default", "allowed", "meaning"), [
            (f"`{k}`", t, f"`{d}`" if d else "", a, m) for k, t, d, a, m in params_rows()]),
        "",
        "## The service (`pond serve`, `pond predict`)",
        "",
        "A command-line option wins over its environment variable, which wins over the default.",
        "",
        *_table(("variable", "option", "default", "meaning"), [
            (f"`{v}`", f"`{o}`" if o else "", f"`{d}`" if d else "", m) for v, o, d, m in settings_rows()]),
        "",
        "## Other environment variables",
        "",
        *_table(("variable", "default", "read by", "meaning"), [
            (f"`{v}`", f"`{d}`" if " " not in d else d, r, m) for v, d, r, m in OTHER_ENVIRONMENT]),
        "",
    ]
    return "\n".join(sections)


def render_dag(cwd: Path = Path(".")) -> str:
    """``dvc dag --md`` of the repository: a Mermaid flowchart that GitHub draws."""
    dvc = Path(sys.executable).with_name("dvc")
    try:
        out = subprocess.run([str(dvc) if dvc.exists() else "dvc", "dag", "--md"], cwd=cwd, capture_output=True,
                             text=True, check=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    except (OSError, subprocess.CalledProcessError) as exc:
        raise PondError(f"docs: `dvc dag --md` failed ({getattr(exc, 'stderr', exc)}). Fix: install the train "
                        "role (POND_ROLE=train bash scripts/setup.sh) and run from the repository root") from None
    return out.stdout.strip().replace("\t", "    ")


def with_dag(readme: str, dag: str) -> str:
    """The README with the text between the dag markers replaced by ``dag``."""
    if DAG_BEGIN not in readme or DAG_END not in readme:
        raise PondError(f"docs: README.md has no {DAG_BEGIN} ... {DAG_END} markers. Fix: put them back where the "
                        "pipeline picture goes")
    head, rest = readme.split(DAG_BEGIN, 1)
    _, tail = rest.split(DAG_END, 1)
    return f"{head}{DAG_BEGIN}\n{dag}\n{DAG_END}{tail}"


def stale(root: Path = Path(".")) -> list[str]:
    """The generated files that differ from what the code and dvc.yaml give now."""
    out = []
    if not (root / REFERENCE).exists() or (root / REFERENCE).read_text() != render_reference():
        out.append(str(REFERENCE))
    readme = (root / README).read_text()
    if with_dag(readme, render_dag(root)) != readme:
        out.append(str(README))
    return out


def run(check: bool, root: Path = Path(".")) -> int:
    if check:
        behind = stale(root)
        for path in behind:
            print(f"docs: {path} is out of date. Fix: run `pond docs` and commit it", file=sys.stderr)
        return 1 if behind else 0
    (root / REFERENCE).parent.mkdir(parents=True, exist_ok=True)
    for path, text in ((REFERENCE, render_reference()), (README, with_dag((root / README).read_text(), render_dag(root)))):
        tmp = (root / path).with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(root / path)
        print(f"docs: wrote {path}")
    return 0
