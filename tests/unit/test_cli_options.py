"""The options every command takes work after the command's name too, and a command that needs no
params does not ask for them."""

from __future__ import annotations

import pytest
import yaml

from pond.core.errors import ConfigError
from tests.conftest import run_pond, small_params


def _read_params(monkeypatch) -> list[tuple]:
    """What a command hands to the params loader, and the environment it runs in, recorded there; the command
    then stops (exit 2) before doing any work."""
    import os

    from pond.core import params

    seen = []

    def load(path, backend=None):
        seen.append((str(path), os.environ.get("POND_QUIET"), backend, os.environ.get("DASK_SCHEDULER_ADDRESS")))
        raise ConfigError("stop here")

    monkeypatch.setattr(params, "load", load)
    monkeypatch.delenv("POND_QUIET", raising=False)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    return seen


@pytest.mark.parametrize("argv", [
    ["--params", "p.yaml", "--quiet", "--engine", "dask", "simulate", "--static-only"],
    ["simulate", "--static-only", "--params", "p.yaml", "--quiet", "--engine", "dask"],
    ["--quiet", "simulate", "--params", "p.yaml", "--static-only", "--engine", "dask"],
])
def test_global_options_before_or_after_the_command(argv, monkeypatch):
    seen = _read_params(monkeypatch)
    assert run_pond(argv) == 2 and seen == [("p.yaml", "1", "dask", None)]


def test_defaults_hold_when_no_option_is_given(monkeypatch):
    seen = _read_params(monkeypatch)
    assert run_pond(["simulate"]) == 2 and seen == [("params.yaml", None, None, None)]


def test_params_after_the_command_are_the_ones_read(small_raw, tmp_path, capsys):
    params = small_params()
    params["base"]["as_of"] = "2026-03-01"       # past the small fleet's days: validate says so, naming the day
    (tmp_path / "late.yaml").write_text(yaml.safe_dump(params))
    assert run_pond(["validate", str(small_raw), "--params", str(tmp_path / "late.yaml")]) == 1
    assert "base.as_of 2026-03-01 cannot be a night" in capsys.readouterr().out
    assert run_pond(["simulate", "--static-only", "--params", str(tmp_path / "missing.yaml")]) == 2
    assert f"{tmp_path / 'missing.yaml'} not found" in capsys.readouterr().err


def test_template_needs_no_params_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                  # no params.yaml here: the defaults
    assert run_pond(["--quiet", "template", "t", "--days", "2", "--vms-per-day", "40"]) == 0
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == \
        ["slowdowns.csv", "spill_counters.csv", "vm_counters.csv", "vm_pool_counters.csv", "vm_slowdowns.csv", "vms.csv",
         "workloads.csv"]
    assert run_pond(["template", "u", "--params", str(tmp_path / "named.yaml")]) == 2   # one named, and missing
    assert "named.yaml not found" in capsys.readouterr().err
