"""Stage modules are thin: they parse, load, call the library and write, in at most 100 lines each."""

from __future__ import annotations

import re

from tests.conftest import PACKAGES, ROOT

LIMIT = 100
NOT_A_STAGE = {"cli"}                                   # the command line itself


def test_stage_modules_are_thin():
    over = {p.stem: len(p.read_text().splitlines()) for p in (ROOT / "pipelines").glob("*.py")
            if len(p.read_text().splitlines()) > LIMIT and p.stem not in NOT_A_STAGE}
    assert not over, f"move the work into the library package that owns it: {over}"


def test_nothing_outside_pipelines_imports_from_it():
    """Library packages, tests and benchmarks call the library; the `pond` command is run as a process or through
    its console-script entry point (``tests.conftest.run_pond``), as an operator runs it."""
    imports = re.compile(r"(?:from|import) pond\.pipelines\b")
    outside = (*(p for p in PACKAGES if p != "pipelines"), "tests", "benchmarks", "scripts", "deploy")
    offenders = [str(p.relative_to(ROOT)) for d in outside for p in (ROOT / d).rglob("*.py")
                 if p.name != "test_thin_stages.py" and imports.search(p.read_text())]
    assert not offenders, offenders
