"""The acceptance run's ``--set``: any params key for every run, and a typo refused before hours of nights. Run as a
user runs it (``python -m benchmarks.backtest_variants --print-params``): tests import nothing from benchmarks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.backtest_variants", "--print-params", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_a_set_key_takes_its_yaml_value(tmp_path):
    out = _run("--variants", "walks", "--seed", "43", "--workdir", str(tmp_path),
               "--set", "optimize.credit_mitigation=true", "--set", "optimize.pool_cap=0.2")
    assert out.returncode == 0, out.stderr
    (params,) = yaml.safe_load(out.stdout).values()
    assert params["optimize"]["credit_mitigation"] is True and params["optimize"]["pool_cap"] == 0.2
    assert params["base"]["seed"] == 43 and params["generate"]["variant"] == "walks"
    assert list(tmp_path.iterdir()) == []                       # nothing run, nothing written


@pytest.mark.parametrize("item", ["optimize.credit_mitigatoin=true", "optimise.tp=97", "optimize.tp", "seed=1"])
def test_a_key_params_does_not_have_is_refused(item, tmp_path):
    out = _run("--workdir", str(tmp_path), "--set", item)
    assert out.returncode != 0 and "--set" in out.stderr
