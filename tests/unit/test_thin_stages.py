"""Stage modules are thin (issue 51): they parse, load, call the library and write, in at most 100 lines each."""

from __future__ import annotations

import re

from tests.conftest import ROOT

LIMIT = 100
NOT_A_STAGE = {"cli"}                                   # the command line itself


def test_stage_modules_are_thin():
    over = {p.stem: len(p.read_text().splitlines()) for p in (ROOT / "pipelines").glob("*.py")
            if len(p.read_text().splitlines()) > LIMIT and p.stem not in NOT_A_STAGE}
    assert not over, f"move the work into the library package that owns it: {over}"


def test_no_library_package_imports_a_stage():
    libraries = ("core", "telemetry", "features", "models", "optimize", "serving", "evaluation")
    offenders = [str(p.relative_to(ROOT)) for d in libraries for p in (ROOT / d).rglob("*.py")
                 if "from pond.pipelines" in p.read_text() or "import pond.pipelines" in p.read_text()]
    assert not offenders, offenders


def test_benchmarks_run_the_library_or_the_command_line_not_a_stage():
    """A benchmark measures the library's functions, or the `pond` command as a user runs it (``pipelines.cli``)."""
    stage = re.compile(r"(?:from|import) pond\.pipelines(?:\.(?!cli\b)\w+| import (?!cli\b))")
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*.py") if stage.search(p.read_text())]
    assert not offenders, offenders
