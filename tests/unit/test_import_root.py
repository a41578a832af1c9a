"""One import root: the project's folders are imported as ``pond.<folder>`` everywhere, benchmarks and
tests reach the code through the installed package (no ``sys.path`` edits) and only through public names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import PACKAGES, ROOT

CODE = (*PACKAGES, "benchmarks", "tests")


def _files(*folders: str) -> list[Path]:
    return sorted(p for d in folders for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of each absolute import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
    return out


@pytest.mark.parametrize("folder", CODE)
def test_project_code_is_imported_under_pond(folder):
    bare = [f"{p.relative_to(ROOT)}:{line} {module}" for p in _files(folder) for line, module, _ in _imports(p)
            if module.split(".")[0] in PACKAGES]
    assert not bare, f"import these as pond.<folder>: {bare}"


def test_benchmarks_and_tests_do_not_edit_sys_path():
    edits = [f"{p.relative_to(ROOT)}:{i}" for p in _files("benchmarks", "tests")
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if "sys.path" in line and p.name != Path(__file__).name]
    assert not edits, f"run benchmarks as `python -m benchmarks.<name>` instead: {edits}"


def test_benchmarks_and_tests_import_only_public_names():
    private = [f"{p.relative_to(ROOT)}:{line} {module}.{name}" for p in _files("benchmarks", "tests")
               for line, module, names in _imports(p) if module.startswith(("pond.", "benchmarks."))
               for name in names if name.startswith("_")]
    assert not private, f"make these public where they are defined, or test through a public function: {private}"


def test_tests_import_nothing_from_benchmarks():
    """Benchmarks are the lab notebook: a test runs one as a user does (``python -m benchmarks.<name>``), so the
    product's tests do not rest on them."""
    used = [f"{p.relative_to(ROOT)}:{line} {module}" for p in _files("tests")
            for line, module, _ in _imports(p) if module == "benchmarks" or module.startswith("benchmarks.")]
    assert not used
