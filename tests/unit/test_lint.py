"""The code passes the pinned ruff's rules (pyproject.toml, ``[tool.ruff]``). Before CI ran them, they found closures
over loop variables and chained comparisons of constants that left two assertions weaker than they read."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_tree_passes_the_linter():
    res = _ruff(".")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_the_linter_reads_the_project_rules(tmp_path):
    """The same run on a file with an unused import and a dict() table: the first is found, the second is allowed."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nTABLE = dict(a=1)\n")
    res = _ruff("--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad))
    assert res.returncode == 1
    assert "F401" in res.stdout and "C408" not in res.stdout
