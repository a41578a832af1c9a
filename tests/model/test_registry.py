"""register -> gate -> aliases -> compare, on two tiny nightly bundles in a throwaway MLflow store."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_pond, small_params

pytestmark = pytest.mark.slow


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    return tmp_path


def _night(small_bundle, small_raw, store, name: str, without_li: bool = False, serve: str = "combined") -> list[str]:
    """A metrics dir and policy for one night serving ``serve``; optionally the same models with LI switched off."""
    d = store / name
    (d / "metrics").mkdir(parents=True)
    policy = json.loads((small_bundle / "policy.json").read_text())
    policy["serve"] = {"policy": serve, "pool_cap": None}
    if without_li:
        policy["li"].update(enabled=False, threshold=None)
    (d / "policy.json").write_text(json.dumps(policy))
    for src, dst in (("o.json", "optimize.json"), ("um.json", "train_um.json"), ("li.json", "train_li.json")):
        shutil.copy2(small_bundle / src, d / "metrics" / dst)
    common = ["--li", str(small_bundle / "li"), "--um", str(small_bundle / "um"),
              "--features", str(small_bundle / "features"), "--raw", str(small_raw)]
    assert run_pond(["evaluate", "--policy", str(d / "policy.json"), *common, "--out", str(d / "evaluation"),
                 "--metrics", str(d / "metrics" / "evaluate.json"), "--plots", str(d / "plots"),
                 "--monitor", str(small_bundle / "monitor")]) == 0
    return ["register", "--policy", str(d / "policy.json"), *common, "--metrics-dir", str(d / "metrics"),
            "--out", str(d / "bundle"), "--metrics", str(d / "register.json")]


def _version(store, name: str):
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    return MlflowClient().get_model_version_by_alias("pond-znuma", name)


def test_gate_promotes_then_rejects_and_compare_prints_both(small_bundle, small_raw, store, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    import yaml
    params.write_text(yaml.safe_dump(small_params()))
    first = _night(small_bundle, small_raw, store, "night1")
    assert run_pond(["--params", str(params), *first]) == 0
    from pond.models.bundle import verify
    assert verify(store / "night1" / "bundle")["as_of"] == json.loads((small_bundle / "policy.json").read_text())["as_of"]
    champion = _version(store, "champion")
    assert str(champion.version) == "1" and champion.tags["gate.decision"] == "champion"
    assert "no champion yet" in champion.tags["gate.reason"]

    # same models, LI switched off: the pool share collapses -> challenger
    second = _night(small_bundle, small_raw, store, "night2", without_li=True)
    assert run_pond(["--params", str(params), *second]) == 0
    challenger = _version(store, "challenger")
    assert str(challenger.version) == "2" and challenger.tags["gate.decision"] == "challenger"
    assert "below the champion's" in challenger.tags["gate.reason"]
    assert str(_version(store, "champion").version) == "1"
    reg = json.loads((store / "night2" / "register.json").read_text())
    assert reg["promoted"] is False
    assert reg["champion_on_same_vms"]["pool_share"] - reg["candidate"]["pool_share"] > 0.02

    capsys.readouterr()
    out = tmp_path / "compare"
    assert run_pond(["--params", str(params), "compare", "champion", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pond-znuma/v1" in text and "pond-znuma/v2" in text and "per_vm_p99_us" in text
    import pandas as pd
    table = pd.read_csv(out / "compare.csv", index_col=0)
    assert pd.isna(table.loc["li_threshold", "pond-znuma/v2"])           # LI off in version 2
    assert float(table.loc["realized_pool", "pond-znuma/v2"]) < float(table.loc["realized_pool", "pond-znuma/v1"])
    assert (out / "curves.png").stat().st_size > 0
    drift = pd.read_csv(out / "drift.csv")
    assert (drift.psi == 0).all() and (drift.ks == 0).all()     # same snapshot in both versions
    assert run_pond(["--params", str(params), "compare", "champion", "7"]) == 2   # no version 7: a clear error
    assert table.loc["served", "pond-znuma/v1"] == "combined"

    # the operator switches the service to UM only: less on the pool, by choice; judged on the budget alone
    third = _night(small_bundle, small_raw, store, "night3", serve="um_only")
    assert run_pond(["--params", str(params), *third]) == 0
    champion = _version(store, "champion")
    assert str(champion.version) == "3" and "changed from combined to um_only" in champion.tags["gate.reason"]
    reg = json.loads((store / "night3" / "register.json").read_text())
    assert reg["candidate"]["pool_share"] < reg["champion_on_same_vms"]["pool_share"] - 0.02


def _locked(*args, **kwargs):
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import INTERNAL_ERROR
    raise MlflowException("(sqlite3.OperationalError) database is locked", error_code=INTERNAL_ERROR)


def _unreachable(*args, **kwargs):
    raise ConnectionError("Connection refused")


@pytest.mark.parametrize("failure", [_locked, _unreachable])
@pytest.mark.parametrize("call", ["get_model_version_by_alias", "get_registered_model"])
def test_gate_fails_closed_on_a_registry_error(small_bundle, small_raw, store, tmp_path, monkeypatch, capsys,
                                               failure, call):
    """A registry that cannot answer is not a registry without a champion: nothing is promoted."""
    import yaml
    from mlflow import MlflowClient

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(small_params()))
    argv = _night(small_bundle, small_raw, store, "night")
    monkeypatch.setattr(MlflowClient, call, failure)
    assert run_pond(["--params", str(params), *argv]) == 2
    err = capsys.readouterr().err
    assert "pond register: error:" in err and "nothing was registered or promoted" in err
    assert not (store / "night" / "bundle").exists() and not (store / "night" / "register.json").exists()
    monkeypatch.undo()
    import mlflow
    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    assert MlflowClient().search_model_versions("name='pond-znuma'") == []


def test_not_found_is_the_only_absence():
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST

    from pond.core.tracking import not_found
    assert not_found(MlflowException("Registered Model with name=x not found", error_code=RESOURCE_DOES_NOT_EXIST))
    assert not_found(MlflowException("Registered model alias champion not found.", error_code=INVALID_PARAMETER_VALUE))
    assert not not_found(MlflowException("bad alias name", error_code=INVALID_PARAMETER_VALUE))
    assert not not_found(MlflowException("database is locked", error_code=INTERNAL_ERROR))
    assert not not_found(ConnectionError("refused"))


def test_a_champion_this_code_cannot_read_does_not_stop_the_night(small_bundle, small_raw, store, tmp_path,
                                                                  monkeypatch):
    """After a rollback the champion may carry a field this code does not know: tonight's bundle is judged on the
    budget alone and promoted, with the reason, instead of the night failing."""
    import yaml

    from pond.core.errors import ModelError
    from pond.evaluation import next_day

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(small_params()))
    assert run_pond(["--params", str(params), *_night(small_bundle, small_raw, store, "night1")]) == 0
    second = _night(small_bundle, small_raw, store, "night2", without_li=True)     # a challenger if judged

    def newer(path):
        raise ModelError(f"{path}: field fleet_monitor.from_a_newer_version: Extra inputs are not permitted; do not "
                         "edit policy.json by hand, regenerate it with `dvc repro`")

    monkeypatch.setattr(next_day, "read_policy", newer)          # the champion's bundle only: register reads its own
    assert run_pond(["--params", str(params), *second]) == 0
    champion = _version(store, "champion")
    assert str(champion.version) == "2"
    assert champion.tags["gate.reason"].startswith("the champion cannot be read by this code (")
    assert "fleet_monitor.from_a_newer_version" in champion.tags["gate.reason"]
    assert "do not edit" not in champion.tags["gate.reason"]
    assert json.loads((store / "night2" / "register.json").read_text())["champion_on_same_vms"] is None
