"""dvc.yaml lists every module a stage runs, so `dvc repro` never says "up to date" over stale outputs.

Each stage's code is the import closure of its entry module (``pipelines/<stage>.py``), read from
the source (imports inside functions included); every project file in it must be a dep of the
stage, itself or through a folder dep.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from tests.conftest import PACKAGES

ROOT = Path(__file__).resolve().parents[2]


def _module_file(name: str) -> Path | None:
    parts = name.split(".")[1:] if name.startswith("pond.") else []   # pond.features -> features/
    if not parts or parts[0] not in PACKAGES:
        return None
    for candidate in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts) / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imports_of(path: Path) -> set[Path]:
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            for k in range(1, len(parts) + 1):   # a package's __init__ runs before its modules
                f = _module_file(".".join(parts[:k]))
                if f is not None:
                    found.add(f)
    return found


def runs_code(path: Path) -> bool:
    """False for a package ``__init__`` that holds only its docstring."""
    body = ast.parse(path.read_text()).body
    return not (path.name == "__init__.py" and all(isinstance(n, ast.Expr) for n in body))


def closure(entry: Path) -> set[Path]:
    seen, todo = set(), [entry]
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(imports_of(f) - seen)
    return {f for f in seen if runs_code(f)}


STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_closure_finds_imports_inside_functions():
    got = {p.relative_to(ROOT).as_posix() for p in closure(ROOT / "pipelines" / "register.py")}
    assert {"pipelines/register.py", "models/bundle.py", "evaluation/gate.py", "core/errors.py"} <= got


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_deps_cover_the_code_it_runs(stage):
    spec = STAGES[stage]
    assert spec["cmd"].startswith(f"pond {stage} "), spec["cmd"]
    deps = [ROOT / d for d in spec["deps"]]
    code = closure(ROOT / "pipelines" / f"{stage}.py")
    missing = sorted(f.relative_to(ROOT).as_posix() for f in code
                     if not any(f == d or d in f.parents for d in deps))
    assert not missing, f"dvc.yaml stage {stage!r} runs these files but does not list them as deps: {missing}"
