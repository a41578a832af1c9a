"""Every parameter a stage reads is declared in ``dvc.yaml``, so that changing it reruns the stage: ``optimize`` read
``qos.max_mitigated_share`` undeclared, and a changed share left evaluate and register judging a policy solved under
the old one. The stages run in this process on the small fleet, with every read of a params field recorded
(``tests.conftest.params_reads``), as the code dependencies are read from the imports (tests/unit/test_dvc_deps.py)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT, params_file, params_reads, small_params, undeclared

pytestmark = pytest.mark.slow

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())


def stage_argv(wd) -> list[list[str]]:
    """The stages of dvc.yaml, in its order, with their outputs under ``wd``."""
    raw, m = wd / "raw", wd / "m"
    common = ["--li", str(wd / "li"), "--um", str(wd / "um"), "--features", str(wd / "features")]
    return [
        ["generate", "--out", str(raw)],
        ["features", "--raw", str(raw), "--out", str(wd / "features"), "--metrics", str(m / "features.json")],
        ["calibrate", "--raw", str(raw), "--features", str(wd / "features"), "--metrics", str(m / "calibration.json"),
         "--plots", str(wd / "plots/cal")],
        ["train_li", "--features", str(wd / "features"), "--raw", str(raw), "--out", str(wd / "li"),
         "--metrics", str(m / "train_li.json"), "--plots", str(wd / "plots")],
        ["train_um", "--features", str(wd / "features"), "--out", str(wd / "um"), "--metrics", str(m / "train_um.json"),
         "--plots", str(wd / "plots")],
        ["optimize", *common, "--raw", str(raw), "--out", str(wd / "policy.json"), "--metrics", str(m / "optimize.json"),
         "--frontier", str(wd / "plots/frontier.csv"), "--plot", str(wd / "plots/frontier.png")],
        ["evaluate", "--policy", str(wd / "policy.json"), *common, "--raw", str(raw), "--out", str(wd / "evaluation"),
         "--metrics", str(m / "evaluate.json"), "--plots", str(wd / "plots")],
        ["backtest", "--raw", str(raw), "--features", str(wd / "features"), "--li", str(wd / "li"),
         "--out", str(wd / "backtest"), "--plots", str(wd / "plots/bt"), "--metrics", str(m / "backtest.json")],
        ["simulate", "--raw", str(raw), "--nightly", str(wd / "backtest"), "--out", str(wd / "sim"),
         "--metrics", str(m / "simulate.json"), "--plots", str(wd / "plots/sim")],
        ["register", "--policy", str(wd / "policy.json"), *common, "--raw", str(raw), "--metrics-dir", str(m),
         "--out", str(wd / "bundle"), "--metrics", str(m / "register.json")],
    ]


def test_every_param_a_stage_reads_is_declared_in_dvc_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    params = ["--quiet", "--params", str(params_file(tmp_path / "params.yaml", small_params()))]
    runs = stage_argv(tmp_path)
    assert [r[0] for r in runs] == list(DVC["stages"])          # every stage of dvc.yaml, in its order
    with params_reads() as (run, reads):
        for argv in runs:
            assert run(params + argv) == 0, argv[0]
    assert set(reads) == set(DVC["stages"])
    assert {"qos.max_mitigated_share", "qos.threshold"} <= reads["optimize"]       # the recorder sees reads
    missing = {stage: undeclared(stage, keys, DVC) for stage, keys in reads.items()}
    assert not any(missing.values()), f"dvc.yaml does not declare params these stages read: {missing}"


def test_the_check_flags_a_read_its_stage_does_not_declare():
    """As dvc.yaml had it: optimize declared qos.threshold, not the share it also reads."""
    before = {"stages": {"optimize": {"params": ["base.seed", "optimize", "qos.threshold"]}}}
    assert undeclared("optimize", {"qos.threshold", "qos.max_mitigated_share", "optimize.pdm"}, before) == \
        ["qos.max_mitigated_share"]
    assert undeclared("optimize", {"qos.max_mitigated_share"}, DVC) == []
