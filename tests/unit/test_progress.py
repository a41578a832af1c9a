"""Progress lines of the long stages: plain lines in a log, nothing when quiet."""

from __future__ import annotations

import os

from pond.core.errors import ConfigError
from pond.core.progress import Steps, line, progress, silenced
from tests.conftest import run_pond


def test_line_has_count_elapsed_and_eta():
    assert line(40, 100, 31.0, "train_li r1.82_pdm5", "splits") == \
        "train_li r1.82_pdm5: 40/100 splits (40%), 0:00:31 elapsed, ETA 0:00:46"
    assert line(3, None, 5.0, "x", "nights") == "x: 3 nights, 0:00:05 elapsed"


def test_plain_lines_the_first_then_every_tenth(capsys, monkeypatch):
    monkeypatch.delenv("POND_QUIET", raising=False)
    assert list(progress(range(100), desc="d", unit="u")) == list(range(100))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 11 and lines[0].startswith("d: 1/100 u (1%)") and lines[-1].startswith("d: 100/100 u (100%)")
    assert list(progress(range(3), desc="n", unit="nights")) == [0, 1, 2]
    assert [s.split(",")[0] for s in capsys.readouterr().err.splitlines()] == \
        ["n: 1/3 nights (33%)", "n: 2/3 nights (67%)", "n: 3/3 nights (100%)"]


def test_quiet_prints_nothing(capsys, monkeypatch):
    monkeypatch.setenv("POND_QUIET", "1")
    assert list(progress(range(5), desc="d")) == list(range(5))
    Steps("features", 2)("reading")
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("POND_QUIET", "0")
    Steps("features", 2)("reading")
    assert capsys.readouterr().err.startswith("features [1/2] reading (0:00:00 elapsed)")


def test_silenced_leaves_the_environment_alone(capsys, monkeypatch):
    """A step run inside another is silenced without writing POND_QUIET (the environment is the
    operator's setting, not a channel between functions)."""
    monkeypatch.delenv("POND_QUIET", raising=False)
    outer = progress(range(2), desc="backtest", unit="nights")
    for _ in outer:
        with silenced():
            assert list(progress(range(3), desc="inner")) == [0, 1, 2] and "POND_QUIET" not in os.environ
    assert "POND_QUIET" not in os.environ
    assert [s.split(",")[0] for s in capsys.readouterr().err.splitlines()] == \
        ["backtest: 1/2 nights (50%)", "backtest: 2/2 nights (100%)"]
    monkeypatch.setenv("POND_QUIET", "0")
    with silenced():
        pass
    assert os.environ["POND_QUIET"] == "0"


def test_pond_quiet_and_scheduler_hold_for_the_call_only(monkeypatch):
    """`pond --quiet --scheduler ADDR` sets both for the stage (and the workers it starts), and an in-process
    caller's environment is as it was afterwards: before, `main(["--quiet", ...])` left every later stage of the
    process silent, so a test of progress lines passed or failed with the order the tests ran in."""
    from pond.core import params

    seen = []

    def load(path, backend=None):   # what a stage meets first: read the environment there, then stop
        seen.append((os.environ.get("POND_QUIET"), os.environ.get("DASK_SCHEDULER_ADDRESS")))
        raise ConfigError("stop here")

    monkeypatch.setattr(params, "load", load)
    monkeypatch.delenv("POND_QUIET", raising=False)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://before:8786")
    assert run_pond(["--quiet", "--scheduler", "tcp://127.0.0.1:8786", "features"]) == 2
    assert seen == [("1", "tcp://127.0.0.1:8786")]
    assert "POND_QUIET" not in os.environ and os.environ["DASK_SCHEDULER_ADDRESS"] == "tcp://before:8786"
    assert run_pond(["features"]) == 2
    assert seen[-1] == (None, "tcp://before:8786")
