"""The built-in fleet through `dvc repro generate`: idempotent, and the seed changes the fleet; `small_repo`, the
repository shrunk to a small fleet that the end-to-end `dvc repro` test (test_foreign_fleet) runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import ROOT, SMALL_GRID

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"{cmd} failed:\n{res.stdout}\n{res.stderr}"
    return res.stdout + res.stderr


def small_repo(dst: Path) -> Path:
    """The tracked files at ``dst`` (no outputs, no lock), params shrunk to a small fleet, a git repo."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if (ROOT / f).is_file() and not f.startswith(("metrics/", "plots/")) and f != "dvc.lock":
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, dst / f)
    params = yaml.safe_load((dst / "params.yaml").read_text())
    params["generate"]["fleet"].update(n_days=12, vms_per_day=400, n_customers=150)
    params["base"]["as_of"] = "2026-01-08"
    params["train_li"].update(n_splits=2, select_splits=2, cv_folds=2, oof_repeats=1)   # the least each allows
    params["train_um"].update(train_days=6, calib_days=1, calib_lag_days=1, backtest_nights=3, alphas=[0.01, 0.1])
    params["generate"]["lab"]["repetitions"] = 1          # a third of the lab's runs: the models' folds stay whole
    params["train_monitor"].update(folds=2, inner_folds=2)
    params["backtest"]["nights"] = 2
    params["simulate"].update(SMALL_GRID)
    (dst / "params.yaml").write_text(yaml.safe_dump(params))
    _run(["git", "init", "-q"], dst)
    return dst


def test_generate_is_idempotent_and_the_seed_changes_the_fleet(tmp_path):
    """The built-in fleet's stage through DVC: a second run reruns nothing, a new seed reruns it and outdates every
    stage after it. Every stage after generate runs through `dvc repro` in test_byo_section_step_by_step (on imported
    tables: its dvc.yaml differs in generate alone) and in this process on the built-in fleet in test_params_read."""
    repo = small_repo(tmp_path / "repo")
    out = _run(["dvc", "repro", "generate"], repo)
    assert "Running stage 'generate'" in out
    first = pd.read_parquet(repo / "data/raw/vms.parquet")
    assert "Running stage" not in _run(["dvc", "repro", "generate"], repo)
    assert "up to date" in _run(["dvc", "status", "generate"], repo)
    assert "features:" in _run(["dvc", "status"], repo)          # what never ran is due
    pd.testing.assert_frame_equal(first, pd.read_parquet(repo / "data/raw/vms.parquet"))

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["base"]["seed"] = 43
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert "generate" in _run(["dvc", "status", "generate"], repo)
    out = _run(["dvc", "repro", "generate"], repo)     # the fleet is what a seed changes; the rest follows it
    assert "Running stage 'generate'" in out
    second = pd.read_parquet(repo / "data/raw/vms.parquet")
    assert not (len(first) == len(second) and first.untouched_fraction.equals(second.untouched_fraction))
