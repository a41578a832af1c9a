"""Every parameter a stage reads is declared in ``dvc.yaml``, so that changing it reruns the stage: ``optimize`` read
``qos.max_mitigated_share`` undeclared, and a changed share left evaluate and register judging a policy solved under
the old one. The stages run in this process on the small fleet, with every read of a params field recorded
(``tests.conftest.params_reads``), as the code dependencies are read from the imports (tests/unit/test_dvc_deps.py)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT, SMALL_GRID, params_file, params_reads, small_params, stage_argv, undeclared

pytestmark = pytest.mark.slow

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())


def test_every_param_a_stage_reads_is_declared_in_dvc_yaml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    small = small_params()
    small["simulate"].update(SMALL_GRID)
    small["train_li"].update(n_splits=2, select_splits=2, cv_folds=2)   # reads, not figures: the least each allows
    params = ["--quiet", "--params", str(params_file(tmp_path / "params.yaml", small))]
    runs = [["generate", "--out", str(tmp_path / "raw")], *stage_argv(tmp_path, tmp_path / "raw")]
    assert [r[0] for r in runs] == list(DVC["stages"])          # every stage of dvc.yaml, in its order
    with params_reads() as (run, reads):
        for argv in runs:
            assert run(params + argv) == 0, argv[0]
    assert set(reads) == set(DVC["stages"])
    assert {"qos.max_mitigated_share", "optimize.credit_caught_calls"} <= reads["optimize"]   # the recorder sees reads
    missing = {stage: undeclared(stage, keys, DVC) for stage, keys in reads.items()}
    assert not any(missing.values()), f"dvc.yaml does not declare params these stages read: {missing}"


def test_the_check_flags_a_read_its_stage_does_not_declare():
    """As dvc.yaml had it: optimize declared qos.threshold, not the share it also reads."""
    before = {"stages": {"optimize": {"params": ["base.seed", "optimize", "qos.threshold"]}}}
    assert undeclared("optimize", {"qos.threshold", "qos.max_mitigated_share", "optimize.pdm"}, before) == \
        ["qos.max_mitigated_share"]
    assert undeclared("optimize", {"qos.max_mitigated_share"}, DVC) == []
