"""Imports only go down (docs/layout.md): core -> telemetry -> features -> models -> optimize | serving | simulator ->
evaluation -> pipelines. With one import root the structure tools that map imports to folders no longer see the
arrows, so this test holds the rule itself."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

LAYERS = {"core": 0, "telemetry": 1, "features": 2, "models": 3, "optimize": 4, "serving": 4, "simulator": 4,
          "evaluation": 5, "pipelines": 6}


def _project_imports(path) -> set[tuple[int, str]]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        out |= {(node.lineno, n.split(".")[1]) for n in names if n.startswith("pond.") and n.count(".") >= 1}
    return out


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_a_package_imports_only_packages_below_it(package):
    up = [f"{p.relative_to(ROOT)}:{line} imports pond.{q}" for p in sorted((ROOT / package).rglob("*.py"))
          for line, q in _project_imports(p) if q != package and LAYERS[q] >= LAYERS[package]]
    assert not up, f"an import that runs up or sideways: {up}"
