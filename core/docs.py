"""The configuration reference and the pipeline picture (docs/pipeline.md), rendered from what the code reads: the fields of a
pydantic model (params.yaml's, the service's settings, the runtime's environment) as table rows, and ``dvc dag``
(`pond docs` assembles them; ``pond docs --check`` fails when the committed files differ)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pond.core.errors import PondError

DAG_BEGIN, DAG_END = "<!-- dvc dag: begin (pond docs) -->", "<!-- dvc dag: end -->"
REPORT_BEGIN, REPORT_END = "<!-- pond report: begin (pond docs, from metrics/) -->", "<!-- pond report: end -->"
MONITOR_BEGIN, MONITOR_END = ("<!-- monitor figures: begin (pond docs, from metrics/train_monitor.json) -->",
                              "<!-- monitor figures: end -->")


def allowed(info: FieldInfo) -> str:
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


def type_name(annotation: Any) -> str:
    if getattr(annotation, "__origin__", None) is Literal:
        return " or ".join(str(a) for a in annotation.__args__)
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return TYPE_NAMES.get(text, text)


def default_text(info: FieldInfo) -> str:
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


def params_rows(model: type[BaseModel], skip: set[str], prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, allowed, meaning) of every key ``model`` (params.yaml's) may set, depth first, but
    ``skip``."""
    rows = []
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += params_rows(annotation, skip, key + ".")
        elif key not in skip:
            rows.append((key, type_name(annotation), default_text(info), allowed(info), info.description or ""))
    return rows


def settings_rows(settings: Any, options: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(variable, option, default, meaning) of every field of the service's ``settings`` model (``options``: field
    -> its command-line option)."""
    rows = []
    for name, info in settings.model_fields.items():
        bounds = allowed(info)
        meaning = (info.description or "") + (f" ({bounds})" if bounds else "")
        rows.append((settings.env_var(name), options.get(name, ""), default_text(info), meaning))
    return rows


def variable_rows(model: type[BaseModel], more: Iterable[tuple[str, str, str]] = ()) -> list[tuple[str, str, str]]:
    """(variable, default, meaning) of every field of ``model`` (named by its alias), then ``more``."""
    rows = [(info.alias or name, default_text(info) if info.get_default() is not None else "unset",
             info.description or "") for name, info in model.model_fields.items()]
    return rows + list(more)


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    cell = lambda v: str(v).replace("|", "\\|")   # noqa: E731
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + \
           ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]


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


def with_dag(readme: str, dag: str, page: str = "docs/pipeline.md") -> str:
    """The page with the text between the dag markers replaced by ``dag``."""
    return between(readme, DAG_BEGIN, DAG_END, dag, page, "the pipeline picture")


def between(text: str, begin: str, end: str, body: str, page: str, what: str) -> str:
    """``text`` with what stands between the markers ``begin`` and ``end`` replaced by ``body``."""
    if begin not in text or end not in text:
        raise PondError(f"docs: {page} has no {begin} ... {end} markers. Fix: put them back where {what} goes")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"
