"""`dvc repro` end to end on a small fleet: idempotent, and the seed changes the fleet."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
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
    params["train_li"].update(n_splits=5, select_splits=3, cv_folds=3, oof_repeats=1)
    params["train_um"].update(train_days=6, calib_days=1, calib_lag_days=1, backtest_nights=3, alphas=[0.01, 0.1])
    params["generate"]["lab"]["repetitions"] = 1          # a third of the lab's runs: the models' folds stay whole
    params["train_monitor"].update(folds=3, inner_folds=2)
    params["backtest"]["nights"] = 2
    (dst / "params.yaml").write_text(yaml.safe_dump(params))
    _run(["git", "init", "-q"], dst)
    return dst


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return small_repo(tmp_path_factory.mktemp("clone") / "repo")


def test_repro_twice_then_new_seed(repo):
    out = _run(["dvc", "repro"], repo)
    assert "Running stage 'features'" in out
    for path in ("data/raw/vms.parquet", "data/features/vm_features.parquet",
                 "data/features/snapshot/workload_history.parquet", "data/features/snapshot/request_shapes.parquet",
                 "metrics/features.json", "metrics/calibration.json", "plots/calibration/calibration.png",
                 "data/models/li/manifest.json", "metrics/train_li.json",
                 "data/models/um/um.onnx", "metrics/train_um.json", "plots/optimize/frontier.csv",
                 "metrics/backtest.json", "data/backtest/2026-01-08/scores.parquet", "data/simulate/sizing.csv",
                 "plots/simulate/savings.png"):
        assert (repo / path).exists(), path
    policy = json.loads((repo / "data/policy/policy.json").read_text())
    assert policy["expected"]["mispredictions_bound"] <= policy["misprediction_budget"] + 1e-12
    li = json.loads((repo / "data/models/li/manifest.json").read_text())["models"]["r1.82_pdm5"]
    assert policy["li"]["sha256"] == li["sha256"] and policy["pdm"] == 5 and policy["tp"] == 98
    ev = json.loads((repo / "metrics/evaluate.json").read_text())
    assert {"combined", "li_only", "um_only", "static_10pct", "static_15pct"} <= set(ev)
    assert 0 <= ev["combined"]["mispredictions_severe"] <= ev["combined"]["mispredictions_conservative"]
    first = pd.read_parquet(repo / "data/raw/vms.parquet")
    out = _run(["dvc", "repro"], repo)
    assert "Running stage" not in out
    assert "up to date" in _run(["dvc", "status"], repo)
    pd.testing.assert_frame_equal(first, pd.read_parquet(repo / "data/raw/vms.parquet"))
    assert "metrics/features.json" in _run(["dvc", "metrics", "show"], repo)

    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["base"]["seed"] = 43
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    out = _run(["dvc", "repro", "generate"], repo)     # the fleet is what a seed changes; the rest follows it
    assert "Running stage 'generate'" in out
    assert "features" in _run(["dvc", "status"], repo)     # ... and every stage after it is out of date
    second = pd.read_parquet(repo / "data/raw/vms.parquet")
    assert not (len(first) == len(second) and first.untouched_fraction.equals(second.untouched_fraction))
